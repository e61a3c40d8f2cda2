"""A large JSON text column stored zlib-compressed.

A node row copies its texts, and a commit row the items it changed (a tool
result's rendered head among them): on the bench's coding-agent workload
they were half the store's bytes (issue 29).  ``pack`` turns a text of
``PACK_AT`` characters or more into ``PREFIX`` and the base64 of its zlib
stream, PostgreSQL's form (its text columns hold no raw bytes; TOAST would
compress only values over 2 kB, with a weaker codec).  SQLite's columns take
any value, so there ``stored`` keeps the stream itself, marked with
``MAGIC``, a quarter smaller than its base64.  ``unpack`` reads either back,
and any text without a mark as is: no JSON starts with ``z`` or a NUL, so a
row written before reads as it was.  zlib is deterministic, so a rebuild
writes the very bytes the live projection did.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

from domain.state_compressor import MAGIC

PREFIX = "zlib:"
PACK_AT = 256  # characters; below this base64's third eats what zlib saves
LEVEL = 6  # the bench's texts: 16% smaller than level 1, for microseconds a row


def pack(text: str) -> str:
    """``text``, compressed when that makes it shorter."""
    if len(text) < PACK_AT:
        return text
    packed = PREFIX + base64.b64encode(zlib.compress(text.encode(), LEVEL)).decode("ascii")
    return packed if len(packed) < len(text) else text


def stored(value: Any) -> Any:
    """How SQLite stores a column's ``value``: a packed text as its zlib stream."""
    if isinstance(value, str) and value.startswith(PREFIX):
        return MAGIC + base64.b64decode(value[len(PREFIX) :])
    return value


def unpack(value: str | bytes) -> str:
    """What ``pack`` was given, from either stored form (any other text is itself)."""
    if isinstance(value, bytes):
        return zlib.decompress(value[len(MAGIC) :]).decode()
    if not value.startswith(PREFIX):
        return value
    return zlib.decompress(base64.b64decode(value[len(PREFIX) :])).decode()
