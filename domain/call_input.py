"""A tool call's arguments, parsed once.

Every render repeats every call the conversation made: parsing each call's
JSON again on every render was about 45% of a render at 300 turns (issue 29),
and the OpenAI shape encoded each parsed value back again.  A call's text is
immutable, so what it parses to never changes: both are memoized by the text
(and the parsed value's identity).  Callers never mutate what they get (a
render is encoded, not edited), so one value serves every render.

The memos are bounded in bytes as well as entries: a call of more than
``MEMO_MAX_CHARS`` is parsed every time (its parse is cheap beside its size),
so they hold at most ``MEMO_SIZE`` calls of at most that size.  ``forget``
drops both (an erasure, here or learnt of from another process: nothing
erased stays in memory here).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

MEMO_SIZE = 4096  # calls: a few long sessions' worth
MEMO_MAX_CHARS = 8192  # at most ~100 MB held in all, if every call were this long
_encoded: dict[int, tuple[dict[str, Any], str]] = {}


def _parsed(call: str | None) -> dict[str, Any]:
    if not call:
        return {}
    try:
        parsed = json.loads(call)
    except ValueError:
        return {"arguments": call}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


_memo = lru_cache(maxsize=MEMO_SIZE)(_parsed)


def tool_input(call: str | None) -> dict[str, Any]:
    """The call's arguments as an object; what is not a JSON object is kept as ``arguments``."""
    if call is not None and len(call) > MEMO_MAX_CHARS:
        return _parsed(call)
    return _memo(call)


def arguments_json(value: dict[str, Any]) -> str:
    """``json.dumps(value, sort_keys=True)``, once per value ``tool_input`` handed out."""
    found = _encoded.get(id(value))
    if found is not None and found[0] is value:
        return found[1]
    text = json.dumps(value, sort_keys=True)
    if len(text) > MEMO_MAX_CHARS:
        return text
    if len(_encoded) >= MEMO_SIZE:
        _encoded.clear()  # crude but thread-safe: a dict's own operations hold the GIL
    _encoded[id(value)] = (value, text)  # the value is kept: its id cannot be reused
    return text


def memo_sizes() -> tuple[int, int]:
    """Calls parsed and values encoded held now (tests)."""
    return _memo.cache_info().currsize, len(_encoded)


def forget() -> None:
    _memo.cache_clear()
    _encoded.clear()
