"""Fact-keeping extractive summaries: the lines of a fold that carry the most information.

The first-line gist (``ExtractiveSummarizer.summarize``) kept greetings and
dropped every fact past an item's first sentence; a nested summary kept only
its newest lines.  Here every item is cut into small units (sentences of
messages, lines of earlier summaries, a digest of each tool call plus its
telling result lines) and units are chosen greedily by how much *new*
information each adds per token, until the fold's budget is full:

* a token's weight is its rarity within the fold (rare words are the names,
  places and specifics a later question asks about), doubled for numbers,
  dates, paths and identifiers, raised for capitalised words and error lines;
* a unit's gain counts only the tokens no chosen unit holds yet, so
  near-duplicates come in once and the summary covers many facts;
* greetings and acknowledgements (no content words) never enter;
* a message's sentence is said without its fillers (``domain.fact_compress``),
  and the sentences kept of one message (or of one earlier summary line) share
  one ``- Name: `` line, so the name and the line's start are paid once: more
  facts fit the same budget.  An earlier summary's lines join only where they
  end up next to each other (the other speaker's line between them left out),
  so a second fold keeps its turns in their order; the tokens a join saves are
  spent on a selection again (``REFILLS``).

The chosen units are printed in their original order, so a later fold reads
them back (a line of several sentences sentence by sentence) and re-selects
among old and new facts alike, rather than keeping the newest lines.
Everything is pure and deterministic: equal items and budget give byte-equal
text.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domain.fact_compress import compress

MAX_UNIT_CHARS = 240  # one unit never crowds out the others
MAX_SOURCE_CHARS = 20_000  # of one item's text read for units (a huge dump's head is enough)
REFILLS = 2  # selections again with the tokens that joined lines left over
REFILL_MIN = 8  # tokens left worth a selection again
LINE_OVERHEAD = 1  # the newline before a "- " line (its "- " is counted with it)

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:@#+-]*[A-Za-z0-9]|[A-Za-z0-9]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
_SPEAKER = re.compile(r"^(?:\([^)]{0,60}\)\s*)?([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s")
_ERROR = re.compile(r"\b(?:error|errors|exception|traceback|failed|failure|fatal|panic|"
                    r"exit(?: code| status)?\s*[1-9]\d*|assert\w*)\b", re.I)  # fmt: skip
_MONTHS = frozenset("january february march april may june july august september october "
                    "november december jan feb mar apr jun jul aug sep sept oct nov dec "
                    "monday tuesday wednesday thursday friday saturday sunday".split())  # fmt: skip
_STOP = frozenset("""
a an the and or but if then so to of in on at by for with from as is are was were be been being
it its it's this that these those i i'm i've i'll i'd you you're you've he she we they me him her
us them my your his our their mine yours what which who whom whose when where why how not no yes
do does did done doing have has had having will would can could should may might must shall just
very really too also about into over after before than there here all any some more most such only
own same other up down out off again further once oh ok okay yeah yep wow hey hi hello thanks thank
great good nice cool awesome sure lol haha glad love like know think feel much many lot lots get got
go going gone make made let let's that's what's it'd don't didn't doesn't isn't wasn't can't won't
one well still even ever always never something anything everything thing things way time really
see seen look looks looking want wanted say said tell told totally definitely amazing wonderful
happy hope take care bye sounds sound awesome right yes absolutely exactly true agree cheers
""".split())  # fmt: skip
_ACK = re.compile(r"^\W*(?:hi|hey|hello|thanks|thank you|ok|okay|sure|great|cool|nice|wow|"
                  r"awesome|yes|no|yeah|bye|congrats|congratulations|got it|sounds good)\b",
                  re.I)  # fmt: skip


@dataclass
class Unit:
    order: tuple[int, int]  # (item, position in item): the output follows the source
    text: str  # the line as printed, without its "- "
    words: dict[str, float]  # content token -> its feature weight (before rarity)
    cost: int  # tokens, as a line of its own
    label: str = ""  # "Maria: ", "user: ": units of one source line and label share a line
    joined: int = 0  # tokens when it joins a line of its source line and label already in
    line: int = 0  # which line of an earlier summary it came from (0 for a message)

    @property
    def key(self) -> tuple[int, int, str]:
        """Units with one key share a printed line: one message's sentences, or one
        earlier summary line's; an earlier summary's lines never merge (turn order)."""
        return (self.order[0], self.line, self.label)


def summarize_facts(items: list[dict[str, Any]], max_tokens: int, header: str,
                    count: Callable[[str], int]) -> str:  # fmt: skip
    """``header`` and the most informative units of ``items`` within ``max_tokens``."""
    units = [u for index, item in enumerate(items) for u in _units(index, item, count)]
    budget = max_tokens - count(header) - 1
    best = header
    for _ in range(REFILLS + 1):
        chosen = _select(units, budget)
        while chosen:
            text = "\n".join([header, *_lines(chosen)])
            if count(text) <= max_tokens:
                break
            chosen.pop()  # a join counted short (never seen): the least informative goes
        else:
            return best
        best = text
        slack = max_tokens - count(text)
        if slack < REFILL_MIN:
            break
        budget += slack  # neighbouring lines of one speaker joined: room for more
    return best


def _lines(chosen: list[Unit]) -> list[str]:
    """One ``- `` line per item and label, its sentences in their order."""
    lines: list[str] = []
    at: dict[tuple[int, int, str], int] = {}
    last: tuple[int, str] | None = None  # the item and label of the line printed last
    for unit in sorted(chosen, key=lambda u: u.order):
        if unit.label and (unit.key in at or (unit.order[0], unit.label) == last):
            lines[at.get(unit.key, len(lines) - 1)] += " " + unit.text[len(unit.label) :]
            at.setdefault(unit.key, len(lines) - 1)
            continue
        at[unit.key] = len(lines)
        lines.append(f"- {unit.text}")
        last = (unit.order[0], unit.label) if unit.label else None
    return lines


def _units(index: int, item: dict[str, Any], count: Callable[[str], int]) -> list[Unit]:
    role = str(item.get("role") or "item")
    text = str(item.get("rendered") or "")[:MAX_SOURCE_CHARS]
    pieces: list[str]
    line_of: list[int] = []  # of a summary: the source line of each piece
    if role == "summary":  # a line of several sentences is re-selected sentence by sentence
        numbered = [(n, p) for n, line in enumerate(text.splitlines()) if line.startswith("- ")
                    for p in _labelled(line[2:])]  # fmt: skip
        line_of = [n for n, _ in numbered]
        pieces = [p for _, p in numbered]
        prefix = ""
    elif role == "tool":
        name = str(item.get("name") or "tool")
        call = " ".join(str(item.get("call") or "").split())[:120]
        outcome = _tool_outcome(text, bool(item.get("is_error")))
        pieces = [f"{name}({call}) -> {outcome}" if call else f"{name} -> {outcome}"]
        pieces += [" ".join(line.split()) for line in text.splitlines()[1:200] if line.strip()]
        prefix = f"tool {name}: "
        pieces = [pieces[0]] + [prefix + p for p in pieces[1:]]
        prefix = ""
    else:
        pieces, prefix = _sentences(text), f"{role}: "
    out = []
    for position, said in enumerate(pieces):
        # a message's sentence: said in fewer tokens, its facts all kept
        piece = compress(said) if prefix else said
        # a speaker's name says who spoke better than the role does
        line = _clip(piece if prefix and _SPEAKER.match(piece) else prefix + piece)
        words = _features(piece)
        if len(words) < 2 or _ACK.match(said) and len(words) < 4:
            continue  # a greeting, an acknowledgement: no fact to keep
        label = _label(line) if role != "tool" else ""
        if label and not line.endswith((".", "!", "?", "…")):  # "…": a clipped unit, as is
            line += "."  # a sentence, so a later fold splits a joined line where it was joined
        body = line[len(label) :]
        joined = count(" " + body) if label else 0
        out.append(Unit((index, position), line, words, count(f"- {line}") + LINE_OVERHEAD,
                        label, joined, line_of[position] if line_of else 0))  # fmt: skip
    return out


_LABEL = re.compile(r"^(?:(?:user|assistant): )?(?:[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}: )?")


def _label(line: str) -> str:
    """The role and speaker a line opens with ("user: ", "Maria: "); "" for none."""
    found = _LABEL.match(line)
    return found.group() if found else ""


def _labelled(line: str) -> list[str]:
    """A summary line's sentences, each with the line's label ("Maria: A. B." -> two)."""
    label = _label(line)
    if not label or line.startswith(("(", "tool ")):
        return [line]
    return [label + part for part in _SENTENCE.split(line[len(label) :])]


def _sentences(text: str) -> list[str]:
    """Sentences of each line; a leading ``Name:`` speaker tag carries to the rest."""
    out: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        found = _SPEAKER.match(line)
        speaker = found.group(1) if found else None
        for n, sentence in enumerate(_SENTENCE.split(line)):
            out.append(sentence if n == 0 or speaker is None else f"{speaker}: {sentence}")
    return out


def _tool_outcome(text: str, is_error: bool) -> str:
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    if not lines:
        return "empty"
    errors = [line for line in lines if _ERROR.search(line)]
    first = errors[0] if errors else lines[0]
    kind = "error" if is_error or errors else f"{len(lines)} lines"
    return f"{kind}: {first[:120]}"


def _features(text: str) -> dict[str, float]:
    """Content tokens of ``text`` with their feature weight."""
    out: dict[str, float] = {}
    error = 1.5 if _ERROR.search(text) else 1.0
    for n, match in enumerate(_WORD.finditer(text)):
        word = match.group()
        low = word.lower()
        if low in _STOP or (len(low) < 3 and not low.isdigit()):
            continue
        weight = 1.0
        if any(c.isdigit() for c in word) or low in _MONTHS:
            weight = 2.0
        elif any(c in word for c in "/._@#") or (word[1:] != word[1:].lower()):
            weight = 2.0  # a path, an identifier, an address, a CamelCase name
        elif word[0].isupper() and n > 0:
            weight = 1.5  # a name mid-sentence
        out[low] = max(out.get(low, 0.0), weight * error)
    return out


def _select(units: list[Unit], budget: int) -> list[Unit]:
    """Lazy greedy: the unit adding the most uncovered weight per token, until full."""
    if budget <= 0 or not units:
        return []
    df: dict[str, int] = {}
    for unit in units:
        for word in unit.words:
            df[word] = df.get(word, 0) + 1
    total = len(units)
    rarity = {w: math.log(1 + total / d) for w, d in df.items()}
    covered: set[str] = set()
    opened: set[tuple[int, int, str]] = set()  # units' keys with a line in the summary already

    def cost(unit: Unit) -> int:
        return unit.joined if unit.label and unit.key in opened else unit.cost

    def gain(unit: Unit) -> float:
        return sum(w * rarity[t] * (0.25 if t in covered else 1.0)
                   for t, w in unit.words.items()) / cost(unit)  # fmt: skip

    heap = [(-gain(u), u.order, i) for i, u in enumerate(units)]
    heapq.heapify(heap)
    siblings: dict[tuple[int, int, str], list[int]] = {}
    for i, unit in enumerate(units):
        if unit.label:
            siblings.setdefault(unit.key, []).append(i)
    chosen: list[Unit] = []
    taken: set[int] = set()
    spent = 0
    while heap:
        negative, _, index = heapq.heappop(heap)
        unit = units[index]
        if index in taken:
            continue  # an earlier entry of a unit scored again after a sibling came in
        fresh = gain(unit)
        if heap and fresh < -heap[0][0] - 1e-12:
            heapq.heappush(heap, (-fresh, unit.order, index))
            continue  # its gain fell since it was scored: score it again in line
        if spent + cost(unit) > budget:
            continue
        if not any(t not in covered for t in unit.words):
            continue  # a near-duplicate: everything it says is in already
        chosen.append(unit)
        taken.add(index)
        spent += cost(unit)
        covered.update(unit.words)
        key = unit.key
        if unit.label and key not in opened:
            opened.add(key)  # its line's other sentences now join this line: cheaper
            for other in siblings[key]:
                if other not in taken:
                    heapq.heappush(heap, (-gain(units[other]), units[other].order, other))
    return chosen


def _clip(text: str) -> str:
    return text if len(text) <= MAX_UNIT_CHARS else text[: MAX_UNIT_CHARS - 1].rstrip() + "…"
