"""A recall query's terms: words only, whatever syntax the text carries."""

from __future__ import annotations

from domain.recall_query import MAX_TERMS, fts5_query, recall_terms, tsquery_text


def test_paths_dotted_names_and_identifiers_give_their_words() -> None:
    assert recall_terms("Open src/app/main.py, then os.path.join(x) and MAX_RETRIES=3") == [
        "open", "src", "app", "main", "py", "os", "path", "join", "max", "retries"]  # fmt: skip


def test_stopwords_one_letter_words_and_repeats_are_dropped() -> None:
    assert recall_terms("What is the a b c of it?") == []
    found = recall_terms("Deploy, deploy DEPLOY the 2024 release v2")
    assert found == ["deploy", "2024", "release", "v2"]
    assert recall_terms("café naïve Größe") == ["café", "naïve", "größe"]
    assert len(recall_terms(" ".join(f"word{i}" for i in range(100)))) == MAX_TERMS


def test_the_engines_syntax_quotes_every_term() -> None:
    terms = recall_terms('"NEAR(x y)" OR AND NOT * ^ : | & ! \' (research)')
    assert terms == ["near", "research"]
    assert fts5_query(terms) == '"near" OR "research"'
    assert tsquery_text(terms) == "'near' | 'research'"


def test_a_term_found_only_inside_a_secret_is_seen_whatever_stands_beside_it() -> None:
    """The placeholder's words (``aws``, ``redacted``) are never shown words: they come from
    the mask, not from the node."""
    from domain.recall_query import matched_in_secret
    from domain.rules.redact import blank

    text = "creds AKIAIOSFODNN7EXAMPLE for the deploy keys"
    secret = "AKIAIOSFODNN7EXAMPLE"
    for query in (secret, f"aws {secret}", f"redacted {secret.lower()}", f"deploy {secret}"):
        assert matched_in_secret(text, blank(text), recall_terms(query)), query
    for query in ("creds", "deploy key", "aws creds"):
        assert not matched_in_secret(text, blank(text), recall_terms(query)), query
    assert not matched_in_secret("no secret here", "no secret here", ["secret"])
