"""The gist of a text (its first line, or first sentence) without reading all of it.

The extractive summarizer keeps one clipped line per item, and the window
guard calls it while projecting, under the lock every session's catch-up
takes.  Collapsing the whitespace of a whole 4 MB single-line node and then
scanning it character by character for a full stop took a second there,
stalling every other session's append (issue 13).  These read only a
window at the start of the text, growing it only while what they found is
still too short to tell, so the clipped line is the same as before, byte for
byte (a rebuild recomputes these summaries and must match what live
projection wrote), at a cost bounded by the clip length, not the text.
"""

from __future__ import annotations

import re
from typing import Any

_NON_SPACE = re.compile(r"\S")
_SENTENCE_END = re.compile(r"[.!?](?= |\Z)")


def first_line(text: Any, enough: int) -> str:
    """The first non-empty line with its whitespace collapsed, or a prefix of it
    (collapsed) of at least ``enough`` characters.  Every line before the
    first non-space character is blank, so the line is the one holding it,
    from there to its first line boundary (``str.splitlines``' boundaries,
    all of them whitespace).
    """
    text = str(text or "")
    found = _NON_SPACE.search(text)
    if found is None:
        return ""
    start, size = found.start(), max(4 * enough, 1024)
    while True:
        window = text[start : start + size]
        lines = window.splitlines()
        whole = len(lines) > 1 or start + size >= len(text)
        line = " ".join(lines[0].split())
        if whole or len(line) >= enough:
            return line
        size *= 2  # mostly whitespace so far: read on


def first_line_gist(text: Any, limit: int) -> str:
    """What ``_first_line`` gave, or a prefix longer than ``limit`` (clipped the same)."""
    return first_line(text, limit + 2)


def first_sentence_gist(text: Any, limit: int) -> str:
    """The first sentence of the first non-empty line, or, when that is longer than
    ``limit``, a prefix of it that is too (so clipping it gives the same line).

    A sentence ends at ``.``, ``!`` or ``?`` followed by a space or the end of
    the line.  A prefix's end is not the line's, but a "sentence" ending there
    is at least ``limit + 2`` long, clipped like the line itself would be.
    """
    line = first_line(text, limit + 2)
    found = _SENTENCE_END.search(line)
    return line[: found.end()] if found else line
