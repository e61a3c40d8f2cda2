"""``kept_lines``: a summary's lines that quote one node's text, through the
labels the extractive and LLM summarizers put in front of what they quote."""

from __future__ import annotations

import pytest

from domain.fact_select import summarize_facts
from domain.rules.redact import mask
from domain.survived import kept_lines
from domain.tokens import count_tokens

SETTINGS = "# settings\nname = demo\nport = 8431\n" + "value = compute(value, option)\n" * 3


def test_the_lines_of_a_fact_summary_are_found_in_their_own_node_only() -> None:
    items = [
        {"role": "user", "rendered": "Deploy to eu-west-1 first.  Then run the smoke tests."},
        {"role": "tool", "name": "read_file", "call": '{"path": "conf/settings.toml"}',
         "rendered": SETTINGS},
        {"role": "assistant", "rendered": "The port is 8431, as conf/settings.toml says."},
    ]  # fmt: skip
    summary = summarize_facts(items, 400, "Summary of 3 items.", count_tokens)
    user, tool, assistant = (kept_lines(summary, str(i["rendered"])) for i in items)
    assert user == ["- user: Deploy eu-west-1 first. Then run smoke tests."]  # "then": sequence
    assert "- tool read_file: name = demo" in tool  # port = 8431: the assistant says it
    assert any(line.startswith("- read_file(") and "-> " in line for line in tool), "the digest"
    assert assistant == ["- assistant: port 8431, conf/settings.toml says."]
    assert not set(user) & set(tool) and not set(tool) & set(assistant)
    assert kept_lines(summary, SETTINGS) == tool, "deterministic"


def test_labels_speakers_clips_and_whitespace() -> None:
    source = "Caroline: I moved to Lisbon in May 2023.  The flat is on Rua Augusta.\n\n  x"
    summary = "\n".join([
        "[Summary] Summary of 9 items: 9 user.",
        "- user: Caroline: I moved to Lisbon in May 2023.",
        "- user: Caroline: The flat is on Rua Augusta.",  # the tag carried to a later sentence
        "- user: Caroline: The flat is on Rua Aug…",  # a clipped unit
        "- tool: read_file: I moved to Lisbon",  # the first-line gist's labels
        "- user: Melanie: The flat is on Rua Augusta.",  # another speaker's: not this node's
        "- none",
        "- user: Done.",
        "## Facts",
    ])  # fmt: skip
    assert kept_lines(summary, source) == summary.splitlines()[1:5]


def test_an_llm_summary_is_matched_where_it_kept_specifics_verbatim() -> None:
    source = "$ pytest -q tests/test_api.py\n1 failed, 12 passed\nexit status 1"
    summary = "## Goal\n- Fix the failing test\n## Errors\n- 1 failed, 12 passed\n- exit status 1"
    assert kept_lines(summary, source) == ["- 1 failed, 12 passed", "- exit status 1"]
    assert kept_lines("## Facts\n- Exit: exit status 1", source) == ["- Exit: exit status 1"]


def test_a_summary_written_masked_quotes_the_masked_source() -> None:
    secret = "sk-proj-Zq9Xw8Vu7Ts6Rr5Qp4Oo3Nn2"
    source = f"The key is {secret} for the staging account."
    summary = f"- user: {mask(source)[0]}"
    assert kept_lines(summary, source) == [summary]
    assert kept_lines(summary, "nothing alike here at all") == []


def test_a_compressed_sentence_is_found_in_its_node_only() -> None:
    """A message's line loses its fillers (``compress``) and still quotes its node."""
    source = "Maria: Hey John! I went to the castle in the hills of England with my aunt."
    line = "- Maria: I went castle hills England with my aunt."
    assert kept_lines(line, source) == [line]
    assert kept_lines(line, "Maria: I went home. The castle was far. England won.") == []
    assert kept_lines(line, "John: my aunt went with me to England") == []


@pytest.mark.parametrize(
    ("line", "source"),
    [
        ("- assistant: tests pass.", "the tests did not pass on main"),  # two words, negated
        ("- user: tests pass on main.", "the tests did not pass on main"),  # a negation skipped
        ("- Maria: moved Denver.", "John: Maria never moved to Denver"),  # another speaker
        ("- Maria: moved to Denver in May.", "John: Maria moved to Denver in May."),
        ("- user: deploy staging Friday.", "deploy the fix to staging after review on Friday"),
    ],
)
def test_a_word_order_match_is_not_credited_to_the_wrong_node(line: str, source: str) -> None:
    assert kept_lines(line, source) == []


def test_a_word_order_match_skips_fillers_only() -> None:
    line = "- Maria: moved Denver in May 2023."
    assert kept_lines(line, "Maria: Oh, so I moved to the Denver in May 2023!") == [line]
    assert kept_lines(line, "(1 May 2023) Maria: moved to Denver in May 2023.") == [line]
    assert kept_lines("- assistant: Reading settings.", "Reading the settings.") != []
    assert kept_lines("- assistant: Reading settings.", "Not reading the settings.") == []
    clipped = "- user: Caroline: I moved Lisbon in M….", "Caroline: I moved to Lisbon in May."
    assert kept_lines(*clipped) == [clipped[0]], "a clipped line, a full stop after its …"
