"""Large texts encoded by the write side are what the projection would have encoded.

``domain.node_text.remember_json`` moves escaping a large node's text out of
the projection's lock (issue 13); the memo is keyed by the text itself, so
a hit can only ever give the same JSON.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain import node_text
from domain.node_text import MEMO_MIN, canonical_json, remember_json


def test_a_remembered_text_encodes_the_same_and_is_taken_once() -> None:
    text = 'a "quoted" line\n\u00e9\u2028\ud83d\ude00 ' * (MEMO_MIN // 10)
    remember_json(text, None, ["not", "a", "text"], "short")
    remember_json(text)  # two nodes with this text: two projections take it
    assert text in node_text._memo
    copy = "".join(list(text))  # an equal text, another object (as decoding gives)
    for _ in range(2):
        assert text in node_text._memo
        assert canonical_json(copy) == json.dumps(text, sort_keys=True, separators=(",", ":"))
    assert text not in node_text._memo
    assert canonical_json(copy) == json.dumps(text, sort_keys=True, separators=(",", ":"))


def test_the_memo_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_text, "MEMO_MAX", 4 * MEMO_MIN)
    for i in range(10):
        remember_json(f"{i}" * MEMO_MIN)
    assert node_text._memo_size <= 4 * MEMO_MIN
    assert node_text._memo_size == sum(len(k) for k in node_text._memo)
    for key in list(node_text._memo):
        assert canonical_json(key) == json.dumps(key)
    assert not node_text._memo and node_text._memo_size == 0


@settings(max_examples=300)
@given(st.text(), st.integers(1, 7))
def test_a_text_escaped_in_pieces_is_the_json_of_the_whole(text: str, piece: int) -> None:
    whole = json.dumps(text, sort_keys=True, separators=(",", ":"))
    saved = node_text.PIECE
    node_text.PIECE = piece  # hypothesis runs this body many times: no fixture
    try:
        assert node_text._encode(text) == whole
    finally:
        node_text.PIECE = saved


def test_a_long_text_is_escaped_in_pieces_the_same() -> None:
    text = 'tab\there "q" \\ \u00e9\ud83d\ude00\x01\u2028' * (node_text.PIECE // 8)
    assert len(text) > 2 * node_text.PIECE
    assert canonical_json(text) == json.dumps(text)
    remember_json(text)
    assert canonical_json(text) == json.dumps(text)
