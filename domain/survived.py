"""What a summary kept of one node: its lines that quote the node's own text.

``explain`` answers, for a summarized item, which of the summary's lines
came from that node.  A summary does not record the source of each line
(an LLM's certainly does not), so the link is found by quotation: a line
survives for a node when what it says, without the labels summarizers put
in front (``- ``, ``user: ``, ``tool read_file: ``, a speaker's ``Name: ``,
a tool digest's ``-> 3 lines: ``), occurs in the node's text with its
whitespace collapsed.  The extractive summaries quote sentences and lines
whole, or a message's sentence without its fillers (``fact_compress.compress``:
its words in the node's order, only filler words between them), so theirs are
found; such a word-order match needs at least ``MIN_WORDS`` words, all of the
line's, never skips a negation, and a line's speaker (``Maria: ``) must be one of
the node's where both name one, so a line is not credited to a node that says
the opposite or is another person's.  An LLM's are found where it kept a
specific verbatim, as its prompt asks.  Pure and deterministic: equal texts
give equal lines.
"""

from __future__ import annotations

import re

from domain.fact_compress import FILLER
from domain.rules.redact import mask

MIN_CHARS = 8  # shorter quotes ("- none", "Done.") say nothing about where they came from
# of a node's text searched: a summarizer reads at most 8,000 characters of an aged
# node (``service.compaction.SOURCE_CHARS``), and a full item as capped for the window
MAX_SOURCE_CHARS = 64_000
_ROLE = re.compile(r"^(?:user|assistant|system|summary|item|marker|tool(?::? [\w.-]+)?):\s+")
_SPEAKER = re.compile(r"^[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}:\s+")
_DIGEST = re.compile(r"\s->\s(?:error|\d+ lines?):\s(.+)$")
_NAMED = re.compile(r"^(?:\([^)]{0,60}\)\s*)?([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s", re.M)


_CLIPPED = re.compile(r"\s*…[.!?]?$")


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _quotes(line: str) -> list[str]:
    """What ``line`` may quote: itself without its bullet, then without its labels."""
    body = line[2:] if line.startswith("- ") else line
    body = _CLIPPED.sub("", body)  # a clipped unit, a full stop or not after its "…"
    out = [body]
    role = _ROLE.match(body)
    if role is not None:
        body = body[role.end() :]
        out.append(body)
    speaker = _SPEAKER.match(body)
    if speaker is not None:  # a speaker tag carried over from an earlier sentence
        out.append(body[speaker.end() :])
    digest = _DIGEST.search(body)
    if digest is not None:  # a tool call's digest quotes its result's telling line
        out.append(digest.group(1))
    return [_collapsed(q) for q in out if len(q.strip()) >= MIN_CHARS]


def kept_lines(summary: str, source: str) -> list[str]:
    """The lines of ``summary`` that quote ``source``, in the summary's order.

    ``source`` is matched masked too: a summary written under ``redact_secrets``
    quotes the masked text (``service.compaction.summarize``).
    """
    source = source[:MAX_SOURCE_CHARS]
    plain = _collapsed(source)
    masked = _collapsed(mask(source)[0])
    words = (_words(plain), _words(masked))
    speakers = set(_NAMED.findall(source))
    kept = []
    for raw in summary.splitlines():
        line = raw.strip()
        quotes = _quotes(line)
        if not quotes or not _same_speaker(line, speakers):
            continue
        said = _words(quotes[-1])  # without its labels; a clipped line's cut word goes
        said = said[:-1] if _CLIPPED.search(line) else said
        if any(q in plain or q in masked for q in quotes) or any(_in_order(said, w) for w in words):
            kept.append(line)
    return kept


def _same_speaker(line: str, speakers: set[str]) -> bool:
    """False when the line names a speaker and the node names others only."""
    body = line[2:] if line.startswith("- ") else line
    body = body[role.end() :] if (role := _ROLE.match(body)) else body
    named = _NAMED.match(body)
    return named is None or not speakers or named.group(1) in speakers


MAX_GAP = 4  # filler words a compressed line may skip between two of its own
# fewer words in order ("tests pass") say little of where they came from: two match a
# node that says nothing else ("Reading the settings."), one never
MIN_WORDS = 3


def _words(text: str) -> list[str]:
    return [w for w in (w.strip(",.!?;:").lower() for w in text.split()) if w]


def _in_order(quote: list[str], source: list[str]) -> bool:
    """Whether all of ``quote`` occurs in ``source`` in order, with at most ``MAX_GAP``
    filler words (those ``compress`` drops: never a negation or a content word) between."""
    if len(quote) < MIN_WORDS:  # a short line only as all that its node says
        return len(quote) == 2 and [w for w in source if w not in FILLER] == quote
    for start, word in enumerate(source):
        if word != quote[0]:
            continue
        at, found = start + 1, 1
        while found < len(quote):
            gap = 0
            while at < len(source) and source[at] != quote[found]:
                if source[at] not in FILLER or gap == MAX_GAP:
                    break
                at, gap = at + 1, gap + 1
            if at >= len(source) or source[at] != quote[found]:
                break
            at, found = at + 1, found + 1
        if found == len(quote):
            return True
    return False
