"""What a summary kept of one node: its lines that quote the node's own text.

``explain`` answers, for a summarized item, which of the summary's lines
came from that node.  A summary does not record the source of each line
(an LLM's certainly does not), so the link is found by quotation: a line
survives for a node when what it says, without the labels summarizers put
in front (``- ``, ``user: ``, ``tool read_file: ``, a speaker's ``Name: ``,
a tool digest's ``-> 3 lines: ``), occurs in the node's text with its
whitespace collapsed.  The extractive summaries quote sentences and lines
whole, or a message's sentence without its fillers (``fact_select.compress``:
its words in the node's order, a few dropped words apart), so theirs are
found; an LLM's are found where it kept a specific verbatim, as its prompt
asks.  Pure and deterministic: equal texts give equal lines.
"""

from __future__ import annotations

import re

from domain.rules.redact import mask

MIN_CHARS = 8  # shorter quotes ("- none", "Done.") say nothing about where they came from
# of a node's text searched: a summarizer reads at most 8,000 characters of an aged
# node (``service.compaction.SOURCE_CHARS``), and a full item as capped for the window
MAX_SOURCE_CHARS = 64_000
_ROLE = re.compile(r"^(?:user|assistant|system|summary|item|marker|tool(?::? [\w.-]+)?):\s+")
_SPEAKER = re.compile(r"^[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}:\s+")
_DIGEST = re.compile(r"\s->\s(?:error|\d+ lines?):\s(.+)$")


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _quotes(line: str) -> list[str]:
    """What ``line`` may quote: itself without its bullet, then without its labels."""
    body = line[2:] if line.startswith("- ") else line
    body = body[:-1].rstrip() if body.endswith("…") else body  # a clipped unit
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
    kept = []
    for raw in summary.splitlines():
        line = raw.strip()
        quotes = _quotes(line)
        if any(q in plain or q in masked for q in quotes) or any(
            _in_order(_words(q), w) for q in quotes for w in words
        ):
            kept.append(line)
    return kept


MAX_GAP = 4  # source words a compressed line may skip between two of its own


def _words(text: str) -> list[str]:
    return [w for w in (w.strip(",.!?;:").lower() for w in text.split()) if w]


def _in_order(quote: list[str], source: list[str]) -> bool:
    """Whether ``quote`` occurs in ``source`` in order, at most ``MAX_GAP`` words apart."""
    if len(quote) < 2:
        return False
    for start, word in enumerate(source):
        if word != quote[0]:
            continue
        at, found = start, 1
        while found < len(quote):
            window = source[at + 1 : at + 2 + MAX_GAP]
            if quote[found] not in window:
                break
            at += 1 + window.index(quote[found])
            found += 1
        if found == len(quote):
            return True
    return False
