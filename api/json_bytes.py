"""A response body, byte for byte what ``JSONResponse`` sends, encoded by orjson.

Encoding a 600-message render with the standard library is a third of the
render route (issue 29), and it runs on the event loop.  orjson writes the
same bytes as ``json.dumps(ensure_ascii=False, allow_nan=False,
separators=(",", ":"))`` for strings, ints, booleans, None, lists and
string-keyed dicts; the two differ only where orjson refuses a value (a key
that is not a string, an int past 64 bits, a lone surrogate: TypeError) and
in how a float is written when Python writes it with an exponent (below
1e-4 or from 1e16 on: orjson writes ``1e16`` or ``0.00001`` where Python
writes ``1e+16`` or ``1e-05``).  Either case falls back to the standard
library, so the bytes never change; the float guard also trips on text that
merely looks like such a number, which only costs the fast path.  NaN and
Infinity never get this far: the domain refuses them (``domain.limits``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# A number token (first, or after ``:``, ``,`` or ``[``) with an exponent, or below 1e-4
# written out: wherever a float may be written differently, and rarely text
# (an id like ``"3e4f..."`` starts after a quote, so it does not trip it).
_MAYBE_FLOAT_DIFFERS = re.compile(rb"(?:^|[:,\[])-?(?:[0-9]+(?:\.[0-9]+)?[eE]|0\.0000)")


def stdlib_bytes(content: Any) -> bytes:
    """What ``JSONResponse`` renders (the reference the fast path must equal)."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")  # fmt: skip


def json_bytes(content: Any) -> bytes:
    """``stdlib_bytes(content)``, usually by orjson."""
    try:
        body = orjson.dumps(content)
    except TypeError:
        return stdlib_bytes(content)
    if _MAYBE_FLOAT_DIFFERS.search(body) is not None:
        return stdlib_bytes(content)
    return body
