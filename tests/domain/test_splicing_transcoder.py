"""Events and digests spell a large text with the JSON its command remembered.

Whatever the spelling, a stored event decodes to the values eventsourcing's
own transcoder would give, and a node's digest is the one it always was.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, UUIDAsHex
from hypothesis import given, settings
from hypothesis import strategies as st

from domain import node_text
from domain.node_commands import content_digest
from domain.splicing_transcoder import LARGE_EVENT, SplicingTranscoder

BIG = st.builds(lambda t, n: t * n, st.text(min_size=1, max_size=20),
                st.just(node_text.MEMO_MIN))  # fmt: skip
LEAVES = st.none() | st.integers() | st.text(max_size=20) | BIG
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                      max_leaves=8)  # fmt: skip


def transcoders() -> tuple[JSONTranscoder, JSONTranscoder]:
    ours, theirs = SplicingTranscoder(), JSONTranscoder()
    for transcoder in (ours, theirs):
        transcoder.register(UUIDAsHex())
        transcoder.register(DatetimeAsISO())
    return ours, theirs


def texts(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return [value] if isinstance(value, str) else []


@settings(max_examples=60, deadline=None)
@given(VALUES, st.booleans())
def test_an_event_decodes_as_eventsourcing_would(value: Any, remembered: bool) -> None:
    if remembered:
        node_text.remember_json(*texts(value))
    event = {"input": value, "id": uuid.UUID(int=7), "at": datetime(2026, 1, 1, tzinfo=UTC)}
    ours, theirs = transcoders()
    assert ours.decode(ours.encode(event)) == theirs.decode(theirs.encode(event))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["user", "tool"]), st.none() | st.text(max_size=5), VALUES, VALUES,
       st.booleans())  # fmt: skip
def test_the_digest_is_the_one_it_always_was(role: str, name: str | None, input: Any,
                                             output: Any, remembered: bool) -> None:  # fmt: skip
    if remembered:
        node_text.remember_json(input, output)
    blob = json.dumps([role, name, input, output], sort_keys=True, default=str)
    assert content_digest(role, name, input, output) == hashlib.sha256(
        blob.encode()).hexdigest()[:16]  # fmt: skip


LARGE = st.builds(lambda t: t * (LARGE_EVENT // len(t) + 1), st.text(min_size=1, max_size=8))
ANY_LEAF = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
            | LARGE | st.uuids() | st.datetimes(timezones=st.just(UTC)))  # fmt: skip
ANY_VALUE = st.recursive(ANY_LEAF, lambda inner: st.lists(inner, max_size=3)
                         | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                         max_leaves=8)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(ANY_VALUE)
def test_a_large_event_decodes_as_eventsourcing_would(value: Any) -> None:
    ours, theirs = transcoders()
    event = {"input": value, "padding": "p" * LARGE_EVENT}
    stored = theirs.encode(event)
    assert len(stored) >= LARGE_EVENT
    expected = theirs.decode(stored)
    assert repr(ours.decode(stored)) == repr(expected)  # repr: nan == nan, 1 is not 1.0


def test_a_large_event_the_fast_parser_refuses_is_read_by_the_stdlib() -> None:
    ours, theirs = transcoders()
    stored = b'{"a":"' + b"x" * LARGE_EVENT + b'","b":"\\ud800"}'
    assert ours.decode(stored) == theirs.decode(stored)


def test_a_large_event_of_texts_takes_the_fast_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = transcoders()
    stored = theirs.encode({"id": uuid.UUID(int=7), "output": "t" * LARGE_EVENT})

    def refuse(self: Any, data: bytes) -> Any:
        raise AssertionError("the stdlib decoded a large event of texts")

    monkeypatch.setattr(JSONTranscoder, "decode", refuse)
    assert ours.decode(stored) == {"id": uuid.UUID(int=7), "output": "t" * LARGE_EVENT}


@pytest.mark.parametrize(
    "value",
    [
        [{"row": i, "at": datetime(2026, 1, 1, tzinfo=UTC)} for i in range(20_000)],  # objects
        list(range(200_000)),  # a long list: past the walk's budget
    ],
)
def test_a_large_event_of_many_small_values_decodes_the_same(value: Any) -> None:
    ours, theirs = transcoders()
    stored = theirs.encode({"output": value})
    assert len(stored) >= LARGE_EVENT
    assert ours.decode(stored) == theirs.decode(stored)
