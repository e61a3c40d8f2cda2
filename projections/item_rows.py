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

from domain.context import ITEM_FIELDS, Item
from domain.node_text import node_texts as natural_texts
from projections.records import NodeRow

# A node's texts as an item first shows them: (rendered, call), or None when
# the node is unknown.
TextsOf = Callable[[str], "tuple[str, str | None] | None"]
_OMITTABLE = ("rendered", "call")
_KEEP = object()  # the "default" of fields a stored item always spells out
_STORED_DEFAULTS = tuple(
    _KEEP if f.name == "call" or f.default is MISSING else f.default for f in fields(Item)
)
_values = attrgetter(*ITEM_FIELDS)


def node_texts(node: NodeRow) -> tuple[str, str | None]:
    """What a ``full`` item of ``node`` renders (cached on the node)."""
    if node.texts is None:
        node.texts = natural_texts(node.role, node.input, node.output)
    return node.texts


def stored_item(item: Item, texts_of: TextsOf) -> dict[str, Any]:
    """``item`` as a row stores it: text equal to its node's, and defaults, left out.

    Most of an item's nineteen fields sit at their defaults, and loading
    (``Item(**raw)``) restores those for free.  ``call`` is the exception:
    a missing ``call`` always means "the node's own", never "None".
    """
    raw = {name: value for name, value, default
           in zip(ITEM_FIELDS, _values(item), _STORED_DEFAULTS, strict=True)
           if value is not default}  # fmt: skip
    if item.source_node_id is not None:
        natural = texts_of(item.source_node_id)
        if natural is not None:
            if item.rendered == natural[0]:
                del raw["rendered"]
            if item.call == natural[1]:
                del raw["call"]
    return raw


def loaded_item(raw: dict[str, Any], texts_of: TextsOf) -> Item:
    """The inverse of ``stored_item``."""
    if "rendered" not in raw or "call" not in raw:
        natural = texts_of(raw["source_node_id"])
        if natural is None:
            raise LookupError(f"stored item {raw['item_id']!r} refers to unknown node "
                              f"{raw['source_node_id']!r}")  # fmt: skip
        raw = dict(zip(_OMITTABLE, natural, strict=True)) | raw
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
        payload = json.loads(row["items"])
        if row["is_checkpoint"]:
            items = {raw["item_id"]: raw for raw in payload}
            continue
        for item_id in payload["removes"]:
            items.pop(item_id, None)
        for raw in payload["upserts"]:
            items[raw["item_id"]] = raw
    loaded = (loaded_item(raw, texts_of) for raw in items.values())
    return sorted(loaded, key=lambda i: i.ord)
