"""How a commit's items are stored: by reference to node text where possible.

A fresh item's text is its node's own content, and an item folded into a
summary keeps that text too, so copying it into every delta and checkpoint
stored each node's content several times over (56 MB of item rows for 15 MB
of node content in a 10,000-node session).  A stored item therefore omits
``rendered`` and ``call`` when they are byte-equal to what its source node
says, and loading fills them back from the same node.  A text a rule
rewrote but that keeps a long run of the node's own (a capped result keeps
both ends) is stored as a splice of it (``splice``: revision 0015); anything
else a rule wrote (a stub, a cleared placeholder, a marker) is stored as it
is.  Rows written before these formats carry every field and load unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import MISSING, fields
from operator import attrgetter
from typing import Any

from domain.context import ITEM_FIELDS, Item, Natural
from domain.node_text import node_blocks, text_of
from domain.node_text import node_texts as natural_texts
from projections.packed_text import unpack
from projections.records import NodeRow, parent_ids_of

# What an item of a node shows as it first appears, or None when the node is unknown.
TextsOf = Callable[[str], "Natural | None"]
# The node a stored item names, or None when it is unknown.
NodeOf = Callable[[str], "NodeRow | None"]
_OMITTABLE = Natural._fields
_KEEP = object()  # the "default" of fields a stored item always spells out
_STORED_DEFAULTS = tuple(
    _KEEP if f.name in _OMITTABLE or f.default is MISSING else f.default for f in fields(Item)
)
_values = attrgetter(*ITEM_FIELDS)
# A rewritten text that keeps a long run of its node's own (a capped result keeps
# both ends) is stored as a splice of it under this key; shorter ones as they are.
SPLICED = "spliced"
SPLICE_MIN = 64


def node_texts(node: NodeRow) -> Natural:
    """What a ``full`` item of ``node`` shows (cached on the node)."""
    if node.texts is None:
        rendered, call = natural_texts(node.role, node.input, node.output)
        blocks = node_blocks(node.role, node.input, node.output)
        call_id = node.call_id if node.role == "tool" else None
        node.texts = Natural(rendered, call, blocks, call_id)
    return node.texts


def node_call(node: NodeRow) -> str | None:
    """``node_texts(node).call`` without reading the node's output (a tool's arguments).

    A tool's arguments are most often a JSON object, whose text is its canonical
    JSON: the very text its row stores, taken as it is rather than parsed and
    written again.
    """
    if node.texts is not None:
        return node.texts.call
    if node.role != "tool":
        return None
    stored = node.stored_input()
    if stored is not None and stored.startswith("{"):
        return stored
    return text_of(node.input)


def stored_item(item: Item, texts_of: TextsOf) -> dict[str, Any]:
    """``item`` as a row stores it: text equal to its node's, and defaults, left out.

    Most of an item's fields sit at their defaults, and loading
    (``Item(**raw)``) restores those for free.  The node's own fields
    (``Natural``: text, call, blocks, call id) are the exception: a missing
    one always means "the node's own", never the default.
    """
    raw = {name: value for name, value, default
           in zip(ITEM_FIELDS, _values(item), _STORED_DEFAULTS, strict=True)
           if value is not default}  # fmt: skip
    if item.source_node_id is None:  # no node to fall back on: a missing field is its default
        for name in ("blocks", "call_id"):
            if raw.get(name) is None:
                raw.pop(name, None)
        return raw
    natural = texts_of(item.source_node_id)
    if natural is not None:
        for name, value in zip(_OMITTABLE, natural, strict=True):
            if raw.get(name) == value:
                del raw[name]
        spliced = splice(raw.get("rendered"), natural.rendered)
        if spliced is not None:
            del raw["rendered"]
            raw[SPLICED] = spliced
    return raw


def splice(text: object, source: str) -> list[Any] | None:
    """``text`` as ``[head, tail, middle]``: ``source``'s first ``head`` and last ``tail``
    characters around ``middle``, when that spares at least ``SPLICE_MIN`` of them.

    Only slices as long as ``text`` are compared, never a copy of ``source``:
    a capped result is a few kB of a node's text that may run to megabytes.
    """
    if not isinstance(text, str) or len(text) < SPLICE_MIN or len(source) < SPLICE_MIN:
        return None
    half = SPLICE_MIN // 2  # head + tail >= SPLICE_MIN: one of them is at least half of it
    if text[:half] != source[:half] and text[-half:] != source[-half:]:
        return None  # a stub, a placeholder: most rewrites, told apart in two comparisons
    shorter = min(len(text), len(source))
    head = _common(shorter, lambda n: text[:n] == source[:n])
    room = shorter - head  # a tail must not reuse the head's characters
    tail = _common(room, lambda n: text[len(text) - n :] == source[len(source) - n :])
    if head + tail < SPLICE_MIN:
        return None
    return [head, tail, text[head : len(text) - tail]]


def _common(limit: int, shared: Callable[[int], bool]) -> int:
    """The largest ``n`` up to ``limit`` for which ``shared(n)`` (a prefix or a suffix of
    that length is the same in both texts): a binary search of slice comparisons, not a
    loop over characters."""
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if shared(mid):
            low = mid
        else:
            high = mid - 1
    return low


def unspliced(spliced: list[Any], source: str) -> str:
    head, tail, middle = int(spliced[0]), int(spliced[1]), str(spliced[2])
    return source[:head] + middle + source[len(source) - tail :]


def loaded_item(raw: dict[str, Any], node_of: NodeOf) -> Item:
    """The inverse of ``stored_item``, given the node an item's row refers to.

    Rows written before blocks and call ids were items' own fields lack them:
    an item shows its node's blocks only while it shows its node's text (a
    rule that rewrote the text replaced the whole content).  Such an item (a
    stub, a placeholder) needs only its node's call and call id, not its
    content: a cold read of a long session decodes the results it still
    shows, not every one it ever held (issue 29).
    """
    if raw.get("source_node_id") is not None and any(name not in raw for name in _OMITTABLE):
        node = node_of(raw["source_node_id"])
        if node is None:
            raise LookupError(f"stored item {raw['item_id']!r} refers to unknown node "
                              f"{raw['source_node_id']!r}")  # fmt: skip
        if SPLICED in raw:  # a rewrite of the node's text that kept much of it
            raw = dict(raw)
            raw["rendered"] = unspliced(raw.pop(SPLICED), node_texts(node).rendered)
        if "rendered" in raw and "blocks" not in raw:
            call_id = node.call_id if node.role == "tool" else None
            own: dict[str, Any] = {"call": node_call(node), "blocks": None, "call_id": call_id}
        else:
            own = node_texts(node)._asdict()
        raw = own | raw
    return Item.from_json(raw)


def items_from_rows(rows: list[dict[str, Any]], target: str, node_of: NodeOf) -> list[Item]:
    """Materialise ``target``'s items from its checkpoint and the deltas below it."""
    by_id = {r["commit_id"]: r for r in rows}
    chain = []
    cursor: str | None = target
    while cursor is not None:
        row = by_id[cursor]
        chain.append(row)
        if row["is_checkpoint"]:
            break
        cursor = parent_ids_of(row["parent_ids"])[0]
    chain.reverse()
    # one parse for the whole chain: a delta is small, and hundreds of them were
    # parsed one call each (issue 29)
    payloads = json.loads("[" + ",".join(unpack(row["items"]) for row in chain) + "]")
    items: dict[str, dict[str, Any]] = {}
    for row, payload in zip(chain, payloads, strict=True):
        if row["is_checkpoint"]:
            items = {raw["item_id"]: raw for raw in payload}
            continue
        for item_id in payload["removes"]:
            items.pop(item_id, None)
        for raw in payload["upserts"]:
            items[raw["item_id"]] = raw
    loaded = (loaded_item(raw, node_of) for raw in items.values())
    return sorted(loaded, key=lambda i: i.ord)
