"""A large body's JSON with its long string values blanked: the same structure, for the
duplicate-key and depth checks.

Those checks need the stdlib parser (it is the one that can see a key twice),
and it decodes every string it meets: 8 MB of node text took it 10-20 ms in
one C call, holding the interpreter lock through every other request's
append (issue 13).  Strings do not nest and a key is never blanked, so the
skeleton has the body's objects, keys and depth; whether each long string
is itself valid JSON is left to the model's parser, which reads the whole
body anyway.

Finding a string's end is ``bytes.find`` (C, no decoding) between quotes,
and the loop around it is Python, which lets other threads run between
iterations.  A body with many quotes (many short strings, or a text full
of escaped quotes) is left to the stdlib parser: the loop would cost more.
Where the body is invalid JSON in a long string *and* repeats a key, the
answer says ``duplicate_key`` where it said ``malformed_json``: both 400.
"""

from __future__ import annotations

import re

LONG = 1024  # bytes: a string value longer than this is blanked
# Past this many quotes a megabyte (plus one allowance) the Python loop between quotes
# costs more than the stdlib's one pass: 8 MB of ["a","a",...] took 0.7 s.
QUOTES_PER_MB = 4096
_KEY_FOLLOWS = re.compile(rb"[ \t\n\r]*:")  # what makes a string a key


def skeleton(raw: bytes, long: int = LONG) -> bytes | None:
    """``raw`` with each string value longer than ``long`` bytes spelled ``""``; None when
    ``raw`` is not UTF-8 without a BOM (the stdlib parser then reads it whole) or a
    string is unterminated (the body is not JSON: the parser says so)."""
    if raw[:3] == b"\xef\xbb\xbf" or b"\x00" in raw[:4]:
        return None
    if raw.count(b'"') > QUOTES_PER_MB * (len(raw) >> 20) + QUOTES_PER_MB:
        return None  # many short strings (or escaped quotes): the stdlib is faster
    pieces: list[bytes] = []
    kept = 0  # raw[:kept] is in pieces
    start = raw.find(b'"')
    while start != -1:
        end = _closing_quote(raw, start)
        if end == -1:
            return None
        if end - start - 1 > long and not _KEY_FOLLOWS.match(raw, end + 1):
            pieces += (raw[kept:start], b'""')
            kept = end + 1
        start = raw.find(b'"', end + 1)
    if not pieces:
        return raw
    pieces.append(raw[kept:])
    return b"".join(pieces)


def _closing_quote(raw: bytes, start: int) -> int:
    """The index of the quote that ends the string opened at ``start``, or -1."""
    end = raw.find(b'"', start + 1)
    while end != -1:
        if _backslashes_before(raw, end) % 2 == 0:
            return end
        end = raw.find(b'"', end + 1)
    return -1


def _backslashes_before(raw: bytes, end: int) -> int:
    """How many backslashes run up to ``raw[end]`` (a window doubling back, each
    stripped in C: a run of a million is not a million Python steps)."""
    window = 16
    while True:
        low = max(0, end - window)
        run = len(raw[low:end]) - len(raw[low:end].rstrip(b"\\"))
        if run < end - low or low == 0:
            return run
        window *= 2
