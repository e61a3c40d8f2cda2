"""A node's text as the model first sees it, defined once.

The write side counts tokens of exactly this text when it records a node,
and the projection renders it and stores items by reference to it.  Both
must agree byte for byte, so there is one definition, and one canonical
JSON spelling for structured content.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from domain.content_blocks import Block, blocks_of, text_view

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
# Large texts the write side encoded ahead of the projection (``remember_json``).
MEMO_MIN = 64 * 1024  # characters: below this, encoding costs less than looking up
MEMO_MAX = 64 * 1024 * 1024  # characters held in all, oldest dropped first
_memo: OrderedDict[str, tuple[str, int]] = OrderedDict()  # text -> (its JSON, uses left)
_memo_size = 0
_memo_lock = threading.Lock()


def canonical_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``, one encoder built once.

    Byte-identical rebuilds depend on it: equal values always give equal text.
    A large text the write side remembered is taken from the memo instead
    (the same text: the memo is keyed by the value itself).
    """
    if type(value) is str and len(value) >= MEMO_MIN:
        global _memo_size
        with _memo_lock:
            found = _memo.pop(value, None)
            if found is not None:
                encoded, uses = found
                if uses > 1:  # two nodes of one batch with the same text
                    _memo[value] = (encoded, uses - 1)
                else:
                    _memo_size -= len(value)
                return encoded
    return _encode(value)


PIECE = 256 * 1024  # characters a single call of the C encoder escapes


def _encode(value: Any) -> str:
    """``_CANONICAL.encode(value)``; a long text is escaped a piece at a time.

    One C call escaping 8 MB held the interpreter lock for 10-20 ms, and every
    other request's thread waited that long.  Between pieces the interpreter
    lets other threads run.  Each character escapes on its own, so the pieces
    join to the same JSON.
    """
    if type(value) is not str or len(value) <= PIECE:
        return _CANONICAL.encode(value)
    escaped = [_CANONICAL.encode(value[at : at + PIECE])[1:-1]
               for at in range(0, len(value), PIECE)]  # fmt: skip
    return '"' + "".join(escaped) + '"'


def remember_json(*values: Any) -> None:
    """Encode large texts now, for the projection's ``canonical_json`` of the same text.

    Called while a command builds its node, under that session's lock only.
    Projecting the node happens under a lock every session's catch-up takes;
    escaping 8 MB of text there held it for tens of milliseconds (issue 13).
    Looking a text up costs a hash and a compare, a few milliseconds.
    """
    global _memo_size
    for value in values:
        if type(value) is not str or len(value) < MEMO_MIN or len(value) > MEMO_MAX // 4:
            continue
        with _memo_lock:
            held = _memo.pop(value, None)
            if held is not None:
                _memo[value] = (held[0], held[1] + 1)
                continue
        encoded = _encode(value)
        with _memo_lock:
            held = _memo.pop(value, None)
            if held is None:
                _memo_size += len(value)
            _memo[value] = (encoded, held[1] + 1 if held else 1)
            while _memo_size > MEMO_MAX:
                dropped, _ = _memo.popitem(last=False)
                _memo_size -= len(dropped)


def remembered_json(value: Any) -> str | None:
    """The JSON ``remember_json`` made of ``value``, left for the projection; else None."""
    if type(value) is not str or len(value) < MEMO_MIN:
        return None
    with _memo_lock:
        found = _memo.get(value)
    return found[0] if found is not None else None


def text_of(value: Any) -> str:
    """A field's text: itself, the text view of content blocks, or canonical JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    blocks = blocks_of(value)
    if blocks is not None:
        return text_view(blocks)
    return canonical_json(value)


def content_of(role: str, input: Any, output: Any) -> Any:
    """The field a node's item shows: a tool's result, a message's primary field.

    A message's primary field is an assistant's output and anyone else's
    input, falling back to the other one when that is empty.
    """
    if role == "tool":
        return output
    primary, other = (output, input) if role == "assistant" else (input, output)
    return primary if primary is not None else other


def node_texts(role: str, input: Any, output: Any) -> tuple[str, str | None]:
    """(text, call): a tool's result and arguments, or a message's text and None."""
    call = text_of(input) if role == "tool" else None
    return text_of(content_of(role, input, output)), call


def node_blocks(role: str, input: Any, output: Any) -> list[Block] | None:
    """The content blocks a node's item renders, when its content is a list of blocks."""
    return blocks_of(content_of(role, input, output))
