"""Stored events spell a large text with the JSON its command already made.

A command encodes a node's large texts once, under its own session's lock
(``node_text.remember_json``).  eventsourcing's transcoder would escape the
same megabytes again while saving, holding the interpreter lock for tens of
milliseconds that every other session's request waits through (issue 13).
This transcoder encodes the event with each remembered text swapped for a
short placeholder, then splices the remembered JSON in.  It decodes like
eventsourcing's own: equal values, whichever spelling stored them.  A large
event is decoded by pydantic's JSON parser (a fifth of the stdlib's time,
which it spends in one call holding the interpreter lock), with
eventsourcing's object hook applied after, inner objects first as the stdlib
applies it.  An event of many small values (a tool result of JSON rows) is
left to the stdlib: the walk would cost more than the parse saves.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from eventsourcing.persistence import JSONTranscoder
from pydantic_core import from_json

from domain.node_text import remembered_json


class SplicingTranscoder(JSONTranscoder):
    """``JSONTranscoder`` that reuses the JSON of large texts a command remembered."""

    def encode(self, obj: Any) -> bytes:
        spliced: list[str] = []
        tag = f"\x00splice-{uuid.uuid4().hex}-"
        skeleton = _swap(obj, spliced, tag)
        if not spliced:
            return super().encode(obj)
        text = self.encoder.encode(skeleton)
        # ``"<tag>N"`` as the encoder spelled it: split into text, N, text, N, ..., text
        pieces = re.split(f'"{re.escape(json.dumps(tag)[1:-1])}(\\d+)"', text)
        pieces[1::2] = [spliced[int(n)] for n in pieces[1::2]]
        return "".join(pieces).encode("utf8")

    def decode(self, data: bytes) -> Any:
        if len(data) < LARGE_EVENT or data.count(b"{") > MANY_OBJECTS:
            return super().decode(data)
        try:
            parsed = from_json(data, cache_strings="keys")
            return self._hooked(parsed, [WALK_BUDGET])
        except (ValueError, _TooMany):  # a lone surrogate, deep nesting, many small values
            return super().decode(data)

    def _hooked(self, value: Any, budget: list[int]) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooMany
        if isinstance(value, dict):
            return self._decode_obj({k: self._hooked(v, budget) for k, v in value.items()})
        if isinstance(value, list):
            return [self._hooked(v, budget) for v in value]
        return value


class _TooMany(Exception):
    """More values than ``WALK_BUDGET``: the stdlib decodes it faster than the walk."""


LARGE_EVENT = 64 * 1024  # bytes: below this the stdlib's parser costs as little
# An event with more objects than this (a tool result of JSON rows: 80,000 took the
# walk 486 ms, the stdlib 179 ms) is the stdlib's; so is one whose walk visits more
# values than the budget (a long list of numbers).  One large for its texts has a
# few dozen values.
MANY_OBJECTS = 1024
WALK_BUDGET = 20_000


def _swap(value: Any, spliced: list[str], tag: str) -> Any:
    """``value`` with each remembered text replaced by a placeholder, its JSON in ``spliced``."""
    if isinstance(value, dict):
        return {k: _swap(v, spliced, tag) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_swap(v, spliced, tag) for v in value]
    # an ASCII text only: its JSON is then byte for byte what eventsourcing's encoder
    # writes, where the memo's escaped spelling of other text would double its size
    encoded = remembered_json(value) if type(value) is str and value.isascii() else None
    if encoded is None:
        return value
    spliced.append(encoded)
    return f"{tag}{len(spliced) - 1}"
