"""A response body, byte for byte what ``JSONResponse`` sends, encoded by orjson.

Encoding a 600-message render with the standard library is a third of the
render route (issue 29), and it runs on the event loop.  orjson writes the
same bytes as ``json.dumps(ensure_ascii=False, allow_nan=False,
separators=(",", ":"))`` for strings, ints, booleans, None, lists and
string-keyed dicts; the two differ in how some floats are written (Python
writes ``1e+16`` and ``1e-05`` where orjson writes ``1e16`` and ``0.00001``),
and orjson refuses a key that is not a string, an int past 64 bits or a lone
surrogate (TypeError).  So a body holding anything but those plain types (a
float, a tuple, a subclass) goes to the standard library, as does one orjson
refuses: the bytes never change.  Looking is one pass over the containers,
a fraction of what the standard library's encoding costs.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_PLAIN = frozenset({str, int, bool, type(None)})


def stdlib_bytes(content: Any) -> bytes:
    """What ``JSONResponse`` renders (the reference the fast path must equal)."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")  # fmt: skip


def plain(content: Any) -> bool:
    """Only dicts, lists, strings, ints, booleans and None, at any depth."""
    stack = [content]
    pop, extend = stack.pop, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is dict:
            extend(value.values())
        elif kind is list:
            extend(value)
        elif kind not in _PLAIN:
            return False
    return True


def json_bytes(content: Any) -> bytes:
    """``stdlib_bytes(content)``, by orjson when the two are known to agree."""
    if not plain(content):
        return stdlib_bytes(content)
    try:
        return orjson.dumps(content)
    except TypeError:
        return stdlib_bytes(content)
