"""The bounded gist (``domain.gist``) clips to exactly what the whole-text one did.

Summaries the window guard writes are recomputed by a rebuild, so reading
only the start of a text must not change a byte of them.  The reference
below is the summarizer's code before it was bounded.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.gist import first_line_gist, first_sentence_gist
from domain.summarizer import MAX_LINE_CHARS, ExtractiveSummarizer, _clip


def whole_first_line(text: Any) -> str:
    for line in str(text or "").splitlines():
        line = " ".join(line.split())
        if line:
            return line
    return ""


def whole_first_sentence(text: Any) -> str:
    line = whole_first_line(text)
    for i, ch in enumerate(line):
        if ch in ".!?" and (i + 1 == len(line) or line[i + 1] == " "):
            return line[: i + 1]
    return line


# Sentence ends, spaces and every line boundary str.splitlines knows, in runs long
# enough to cross the window edges (it starts at 1,024 characters).
PIECES = st.sampled_from(["a", "bc", ".", "!", "?", " ", "  ", "\t", "\n", "\r", "\r\n",
                          "\x0b", "\x0c", "\x1c", "\x1e", "\x85", "\u2028", "\u3000", "\xa0",
                          "é"])  # fmt: skip
TEXTS = st.builds(
    lambda parts, runs: "".join(p * n for p, n in zip(parts, runs, strict=False)),
    st.lists(PIECES, max_size=40),
    st.lists(st.sampled_from([1, 2, 3, 7, 60, 500, 1100, 2500]), min_size=40, max_size=40),
)


@settings(max_examples=400, deadline=None)
@given(text=TEXTS, limit=st.sampled_from([1, 5, 40, MAX_LINE_CHARS]))
def test_the_clipped_gist_is_the_one_the_whole_text_gave(text: str, limit: int) -> None:
    assert _clip(first_line_gist(text, limit), limit) == _clip(whole_first_line(text), limit)
    assert _clip(first_sentence_gist(text, limit), limit) == _clip(
        whole_first_sentence(text), limit
    )
    tool = "grep: "
    assert _clip(tool + first_line_gist(text, limit), limit) == _clip(
        tool + whole_first_line(text), limit
    )


@pytest.mark.parametrize("limit", [1, 5, 40, MAX_LINE_CHARS])
def test_edges_of_the_window(limit: int) -> None:
    """Lines ending exactly at, or just past, a window; windows of nearly only spaces."""
    texts = ["x" * 5000 + ". y", "x" * 161 + ".", "x" * 158 + ". y", " " * 9000 + "a. b",
             "\n" * 3000 + "a b" * 2000, "ab " * 3000, "a" + " " * 8000 + "b. c",
             "a" + " " * 1100 + "b. c", "x" * 150 + " " * 2000 + "y" * 20 + ". z",
             "x" * (limit - 1) + " " * 1100 + "y", "x" * 1023 + "\r\n" + "y", None, ""]  # fmt: skip
    for text in texts:
        assert _clip(first_sentence_gist(text, limit), limit) == _clip(
            whole_first_sentence(text), limit
        )
        assert _clip(first_line_gist(text, limit), limit) == _clip(whole_first_line(text), limit)


def test_a_huge_node_is_summarized_from_its_start() -> None:
    """64 MB on one line: the gist comes from its start (the old scan took seconds)."""
    huge = "the quick brown fox " * (64 * 1024 * 1024 // 20)
    items = [{"role": "user", "rendered": huge}, {"role": "tool", "name": "t", "rendered": huge}]
    text = ExtractiveSummarizer().summarize(items)
    assert text.splitlines()[1] == "- user: " + _clip(whole_first_sentence(huge[:4096]))
