"""Tombstones for attach and merge sources that were erased.

An attach or merge names its source session; if that session is no longer
in the log (``domain/erasure.py``), the projection shows one ``full`` item
saying so where the copies stood.  It is decided from the remaining events
alone, so a rebuild after an erasure shows exactly what the live projection
shows; before any erasure no source is ever missing and nothing changes.
"""

from __future__ import annotations

from domain.context import Item
from domain.erasure import attach_tombstone, merge_tombstone
from domain.tokens import item_tokens
from domain.working_context import WorkingContext
from projections.records import NodeRow


def _tombstone(node: NodeRow, suffix: str, text: str, key: str) -> Item:
    return Item(
        item_id=f"{node.node_id}:{suffix}", source_node_id=node.node_id, role="user",
        state="full", rendered=text, tokens=item_tokens(text), ord=0,
        touched_at=node.created_at, attached_from=key,
    )  # fmt: skip


def attach_erased(ctx: WorkingContext, node: NodeRow, source: str, head: str) -> None:
    """Stage a tombstone for an attach whose source session was erased."""
    item = _tombstone(node, "erased", attach_tombstone(source), f"{source}:{head}")
    item.ord = ctx.next_ord()
    ctx.add(item)


def merge_erased(ctx: WorkingContext, node: NodeRow, sources: list[str]) -> None:
    """One tombstone per erased merge peer session, in the order the merge named them."""
    for index, source in enumerate(sources):
        item = _tombstone(node, f"erased{index}", merge_tombstone(source), f"{source}:merge")
        item.ord = ctx.next_ord()
        ctx.add(item)
