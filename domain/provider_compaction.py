"""A provider's compaction item folds, in that provider's renders, the items it covers.

Anthropic's ``compaction`` block and OpenAI's encrypted ``compaction`` item
(``domain.native_blocks``) stand for the conversation before them: the
provider reads the compaction and ignores what came earlier.  So a render for
the family that made the latest one leaves the items before it out, as if
summarized, and the compaction stands for them.  Only that family can read
it: for every other shape the items stay as the rules left them.

The fold is part of rendering, not a rule over the commit, because it
depends on the shape: the commit (its states, transitions and budget) is the
same for every provider, and a fold only shortens the render (the budget the
commit fits stays an upper bound).  It is pure: the same commit and shape
fold the same items.  Each fold is audited in the answer's ``folded`` list,
rows of the same form as a commit's transitions (rule ``provider_compaction``).
Locked items, anchors (the system prompt and the first user message) and
items already summarized are untouched.  An Anthropic compaction whose
``content`` is null (its compaction failed) folds nothing.
"""

from __future__ import annotations

from typing import Any

from domain.context import ContextCommit, Item
from domain.native_blocks import ANTHROPIC, SHAPE_FAMILY, family

RULE = "provider_compaction"


def _stands_for_earlier(block: dict[str, Any], made_by: str) -> bool:
    """A compaction of ``made_by`` that holds a summary: Anthropic's content is
    null when its compaction failed, and then it stands for nothing."""
    return (block["type"] == "compaction" and family(block) == made_by
            and not (made_by == ANTHROPIC and block.get("content") is None))  # fmt: skip


def _compacts(item: Item, made_by: str) -> bool:
    return (item.role == "assistant" and item.state != "summarized"
            and any(_stands_for_earlier(b, made_by) for b in item.blocks or ()))  # fmt: skip


def folds(commit: ContextCommit, shape: str) -> list[dict[str, Any]]:
    """The items a render in ``shape`` folds into a compaction, as audit rows, in order."""
    made_by = SHAPE_FAMILY.get(shape)
    if made_by is None:
        return []
    ordered = sorted(commit.items, key=lambda i: i.ord)
    stands = next((i for i in reversed(ordered) if _compacts(i, made_by)), None)
    if stands is None:
        return []
    return [{"item_id": item.item_id, "source_node_id": item.source_node_id,
             "from_state": item.state, "to_state": "summarized", "rule": RULE,
             "inputs": f"before {stands.item_id}, whose {made_by} compaction block stands "
                       f"for the items before it in {shape} renders"}
            for item in ordered
            if item.ord < stands.ord and item.state != "summarized"
            and not item.locked and not item.is_anchor]  # fmt: skip


def folded_ids(commit: ContextCommit, shape: str) -> frozenset[str]:
    return frozenset(row["item_id"] for row in folds(commit, shape))
