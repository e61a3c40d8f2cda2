"""The default summary keeps facts: chosen by information, within the fold's budget."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.fact_compress import compress
from domain.summarizer import BudgetedSummarizer, ExtractiveSummarizer
from domain.tokens import count_tokens

CHAT: list[dict[str, Any]] = [
    {"role": "user", "rendered": "Hey! How are you?"},
    {"role": "assistant", "rendered": "Thanks, great! Good to see you."},
    {
        "role": "user",
        "rendered": "Caroline: I moved to Lisbon on 3 March 2023. I adopted a dog named Biscuit.",
    },  # fmt: skip
    {"role": "assistant", "rendered": "Wow, that is so nice!"},
    {
        "role": "user",
        "rendered": "The server listens on port 8431 and the config is in /etc/app/settings.toml.",
    },  # fmt: skip
]


def test_keeps_facts_drops_greetings_and_is_deterministic() -> None:
    s = ExtractiveSummarizer()
    assert isinstance(s, BudgetedSummarizer)
    text = s.summarize_within(CHAT, 200)
    assert text == s.summarize_within([dict(i) for i in CHAT], 200)
    assert text.startswith("Summary of 5 items: 3 user, 2 assistant.")
    for fact in ("Lisbon", "3 March 2023", "Biscuit", "8431", "/etc/app/settings.toml"):
        assert fact in text
    assert "How are you" not in text and "so nice" not in text
    # one line per message and speaker: the name is said once for its sentences
    assert "- Caroline: I moved Lisbon on 3 March 2023. I adopted dog named Biscuit." in text


def test_fills_the_budget_and_no_more() -> None:
    items = [{"role": "user", "rendered": f"Fact {n}: the code for room {n} is {n * 7919}."}
             for n in range(200)]  # fmt: skip
    for budget in (60, 300, 1500):
        text = ExtractiveSummarizer().summarize_within(items, budget)
        assert count_tokens(text) <= budget
        assert count_tokens(text) > budget * 0.7, "the room the fold gives is used"


def test_a_nested_summary_reselects_old_facts() -> None:
    """Folding a summary again keeps its informative lines, not only the newest ones."""
    s = ExtractiveSummarizer()
    first = s.summarize_within(CHAT, 200)
    chatter = [{"role": "assistant", "rendered": f"Yes, I think that sounds fine {n}."}
               for n in range(100)]  # fmt: skip
    again = s.summarize_within([{"role": "summary", "rendered": first}, *chatter], 120)
    assert "8431" in again and "Biscuit" in again


def test_a_line_of_sentences_is_chosen_again_sentence_by_sentence() -> None:
    """A folded summary's line of several sentences keeps its label on each one kept."""
    s = ExtractiveSummarizer()
    first = s.summarize_within(CHAT, 200)
    again = s.summarize_within([{"role": "summary", "rendered": first}], 30)
    assert "Caroline: " in again and again.count("Caroline: ") == 1
    kept = [line for line in again.splitlines() if line.startswith("- Caroline: ")]
    assert kept and len(kept[0]) < len(first.splitlines()[1]), "one of its sentences went"


def test_compress_keeps_facts_drops_fillers() -> None:
    said = "(1 May 2023) Maria: Hey John, I went to the castle in England with my aunt."
    assert compress(said) == "(1 May 2023) Maria: I went castle England with my aunt."
    assert compress("I didn't go to the gym, not once.") == "I didn't go gym, not once."
    code = "Run the tests: for x in range(3): print(x)"
    assert compress(code) == code, "code is left as written"


def test_tool_digest_names_the_call_and_its_error() -> None:
    items = [{"role": "tool", "name": "bash", "call": '{"cmd": "pytest tests/test_api.py"}',
              "rendered": "collected 3 items\nFAILED tests/test_api.py::test_login - "
                          "AssertionError: 401 != 200\n1 failed, 2 passed",
              "is_error": True}]  # fmt: skip
    text = ExtractiveSummarizer().summarize_within(items, 200)
    assert 'bash({"cmd": "pytest tests/test_api.py"}) -> error' in text
    assert "test_login" in text and "401" in text


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "summary"]),
                          st.text(max_size=300)), max_size=12),
       st.integers(min_value=20, max_value=600))  # fmt: skip
def test_always_within_budget_and_deterministic(raw: list[tuple[str, str]], budget: int) -> None:
    items = [{"role": r, "name": "t" if r == "tool" else None, "rendered": x} for r, x in raw]
    text = ExtractiveSummarizer().summarize_within(items, budget)
    assert text == ExtractiveSummarizer().summarize_within(items, budget)
    header = text.splitlines()[0]
    assert count_tokens(text) <= max(budget, count_tokens(header))


def test_a_second_fold_keeps_the_turns_in_their_order() -> None:
    """An earlier summary's lines are never merged by speaker: turn order is a fact."""
    turns = [
        {"role": "user", "rendered": "Use Postgres for the orders database."},
        {"role": "assistant", "rendered": "Done, I switched the orders database to Postgres 16."},
        {"role": "user", "rendered": "Please switch the orders database back to SQLite 3.45."},
        {"role": "assistant", "rendered": "Reverted: the orders database is on SQLite again."},
    ]
    s = ExtractiveSummarizer()
    first = s.summarize_within(turns, 400)
    again = s.summarize_within([{"role": "summary", "rendered": first}], 400)
    assert again.splitlines()[1:] == first.splitlines()[1:]
    lines = again.splitlines()
    postgres = next(n for n, line in enumerate(lines) if "Use Postgres" in line)
    sqlite = next(n for n, line in enumerate(lines) if "back SQLite 3.45" in line)
    switched = next(n for n, line in enumerate(lines) if "Postgres 16" in line)
    assert postgres < switched < sqlite and "Postgres" not in lines[sqlite]


def test_a_clipped_line_gets_no_full_stop_and_is_found() -> None:
    from domain.survived import kept_lines

    said = "Maria: " + " ".join(f"castle{n} Denver{n}" for n in range(40)) + "."
    text = ExtractiveSummarizer().summarize_within([{"role": "user", "rendered": said}], 400)
    line = next(line for line in text.splitlines() if line.startswith("- Maria: "))
    assert line.endswith("…") and not line.endswith("….")
    assert kept_lines(text, said) == [line]


def test_neighbouring_lines_of_one_speaker_may_join_in_order() -> None:
    """Once the other speaker's line between them is left out, two lines join, in order."""
    summary = "\n".join([
        "Summary of 3 items: 2 user, 1 assistant.",
        "- user: Maria moved Denver 2021.",
        "- assistant: Thanks, great!",  # no fact: left out
        "- user: Maria adopted dog named Biscuit 2022.",
    ])  # fmt: skip
    again = ExtractiveSummarizer().summarize_within([{"role": "summary", "rendered": summary}], 60)
    assert "- user: Maria moved Denver 2021. Maria adopted dog named Biscuit 2022." in again
