"""``compress`` drops fillers only: answers, verdicts, amounts, sequence and SQL stay."""

from __future__ import annotations

import pytest

from domain.fact_compress import compress


@pytest.mark.parametrize(
    ("said", "line"),
    [
        ("Hey John, I went to the castle.", "I went castle."),  # a greeting and its name go
        ("Well no, we ship Friday.", "Well no, we ship Friday."),  # an answer is a fact
        ("Hmm wrong, use port 80.", "wrong, use port 80."),  # a verdict is a fact
        ("Great news, the deploy is done.", "Great news, deploy done."),
        ("Yes, we ship Friday.", "Yes, we ship Friday."),  # "yes" answers a question
        ("Oh No, the build broke.", "No, build broke."),  # never taken for a name
    ],
)
def test_an_interjection_goes_its_content_stays(said: str, line: str) -> None:
    assert compress(said) == line


@pytest.mark.parametrize(
    ("said", "line"),
    [
        ("Latency increased by 50%.", "Latency increased by 50%."),
        ("Latency increased to 50%.", "Latency increased to 50%."),
        ("3 of 5 tests failed.", "3 of 5 tests failed."),
        ("1 in 10 requests fail.", "1 in 10 requests fail."),
        ("Raise the timeout from 30 to 60 seconds.", "Raise timeout from 30 to 60 seconds."),
        ("We moved on 3 March 2023.", "We moved on 3 March 2023."),
        ("Then run the smoke tests.", "Then run smoke tests."),  # the sequence
        ("I went to the gym in town.", "I went gym town."),  # no number: fillers go
    ],
)
def test_a_preposition_before_a_number_and_then_stay(said: str, line: str) -> None:
    assert compress(said) == line


def test_sql_is_left_as_written() -> None:
    sql = "WHERE deleted_at IS NULL AND id IN (1, 2)"
    assert compress(sql) == sql
    select = "Run SELECT id FROM orders first."
    assert compress(select) == select
