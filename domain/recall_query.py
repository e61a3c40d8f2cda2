"""A recall query's search terms, and how each database's full-text syntax spells them.

The text a user (or a model) asks with is never spliced into a query
language: it is cut into words (runs of letters and digits, so a path
``src/app/main.py`` or a dotted name ``os.path.join`` gives its parts, as
the databases' own tokenizers cut the stored text), lower-cased, stripped of
English stopwords and of one-character words, and each surviving term is
quoted or joined by the query builders below.  Terms are ORed: a hit need
not hold every word, and the engines rank the ones holding more, rarer
words first.
"""

from __future__ import annotations

import re

MAX_TERMS = 32  # a long question is still a handful of distinctive words
_WORD = re.compile(r"[^\W_]+")  # letters and digits, any script; ``_`` separates, as in FTS5

STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves also get got let may
might must shall us
""".split()
)


def recall_terms(text: str) -> list[str]:
    """The distinct search terms of ``text``, in the order they first appear."""
    terms: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) > 1 and word not in STOPWORDS and word not in terms:
            terms.append(word)
            if len(terms) == MAX_TERMS:
                break
    return terms


def fts5_query(terms: list[str]) -> str:
    """SQLite FTS5 ``MATCH`` syntax: each term a quoted string, ORed."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def tsquery_text(terms: list[str]) -> str:
    """PostgreSQL ``to_tsquery('english', ...)`` input: the terms ORed.  A term is letters and
    digits only (``recall_terms``), so it cannot be an operator; quoted as a lexeme anyway."""
    return " | ".join("'" + term.replace("'", "''") + "'" for term in terms)


def text_words(text: str) -> set[str]:
    """Every word of ``text`` as ``recall_terms`` cuts a query (no stopword or length cut)."""
    return set(_WORD.findall(text.lower()))


def _stem(word: str) -> str:
    """A rough stem, so that a term the engines matched through their stemmer (``keys`` for
    ``key``) is still seen: erring towards equal stems only ever drops a hit."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def matched_in_secret(text: str, blanked: str, terms: list[str]) -> bool:
    """Whether a query term occurs in ``text`` only inside a secret (``blanked``: ``text``
    with its secrets blanked out).  Such a hit is dropped whole: shown masked, its presence
    (or its score) would still confirm a guessed secret."""
    if blanked == text:
        return False
    hidden = {_stem(w) for w in text_words(text)} - {_stem(w) for w in text_words(blanked)}
    return any(_stem(term) in hidden for term in terms)
