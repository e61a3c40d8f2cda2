"""How a commit's items are stored: by reference to node text where possible.

A fresh item's text is its node's own content, and an item folded into a
summary keeps that text too, so copying it into every delta and checkpoint
stored each node's content several times over (56 MB of item rows for 15 MB
of node content in a 10,000-node session).  A stored item therefore omits
``rendered`` and ``call`` when they are byte-equal to what its source node
says, and loading fills them back from the same node.  Anything a rule
rewrote (a stub, a capped result, a cleared placeholder, a marker) differs
from the node and is stored as it is.  Rows written before this format carry
every field and load unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import MISSING, fields
from operator import attrgetter
from typing import Any

from domain.context import ITEM_FIELDS, Item, Natural
from domain.node_text import node_blocks
from domain.node_text import node_texts as natural_texts
from projections.packed_text import unpack
from projections.records import NodeRow

# What an item of a node shows as it first appears, or None when the node is unknown.
TextsOf = Callable[[str], "Natural | None"]
_OMITTABLE = Natural._fields
_KEEP = object()  # the "default" of fields a stored item always spells out
_STORED_DEFAULTS = tuple(
    _KEEP if f.name in _OMITTABLE or f.default is MISSING else f.default for f in fields(Item)
)
_values = attrgetter(*ITEM_FIELDS)


def node_texts(node: NodeRow) -> Natural:
    """What a ``full`` item of ``node`` shows (cached on the node)."""
    if node.texts is None:
        rendered, call = natural_texts(node.role, node.input, node.output)
        blocks = node_blocks(node.role, node.input, node.output)
        call_id = node.call_id if node.role == "tool" else None
        node.texts = Natural(rendered, call, blocks, call_id)
    return node.texts


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
    return raw


def loaded_item(raw: dict[str, Any], texts_of: TextsOf) -> Item:
    """The inverse of ``stored_item``.

    Rows written before blocks and call ids were items' own fields lack them:
    an item shows its node's blocks only while it shows its node's text (a
    rule that rewrote the text replaced the whole content).
    """
    if raw.get("source_node_id") is not None and any(name not in raw for name in _OMITTABLE):
        natural = texts_of(raw["source_node_id"])
        if natural is None:
            raise LookupError(f"stored item {raw['item_id']!r} refers to unknown node "
                              f"{raw['source_node_id']!r}")  # fmt: skip
        own = natural._asdict()
        if "rendered" in raw and "blocks" not in raw:
            own["blocks"] = None
        raw = own | raw
    return Item.from_json(raw)


def items_from_rows(rows: list[dict[str, Any]], target: str, texts_of: TextsOf) -> list[Item]:
    """Materialise ``target``'s items from its checkpoint and the deltas below it."""
    by_id = {r["commit_id"]: r for r in rows}
    chain = []
    cursor: str | None = target
    while cursor is not None:
        row = by_id[cursor]
        chain.append(row)
        if row["is_checkpoint"]:
            break
        cursor = json.loads(row["parent_ids"])[0]
    items: dict[str, dict[str, Any]] = {}
    for row in reversed(chain):
        payload = json.loads(unpack(row["items"]))
        if row["is_checkpoint"]:
            items = {raw["item_id"]: raw for raw in payload}
            continue
        for item_id in payload["removes"]:
            items.pop(item_id, None)
        for raw in payload["upserts"]:
            items[raw["item_id"]] = raw
    loaded = (loaded_item(raw, texts_of) for raw in items.values())
    return sorted(loaded, key=lambda i: i.ord)
