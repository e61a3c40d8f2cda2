"""Counting tokens without building the token list gives the same count as ``encode``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from domain import tokens

PIECES = ["hello", " world", "<|endoftext|>", "été", "🙂", "\n\n", "  x", "def f():",
          "\ud800", "\udfff", "<|fim_prefix|>", "ünïcödé", "1234567"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=40))
def test_the_count_is_the_length_of_the_encoding(parts: list[str]) -> None:
    text = "".join(parts)
    encoding = tokens._encoder()
    tokens.count_tokens.cache_clear()
    expected = len(encoding.encode(text, disallowed_special=()))  # type: ignore[attr-defined]
    assert tokens.count_tokens(text) == expected
