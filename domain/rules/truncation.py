"""Per-item cap: a huge tool result is cut at head and tail, even in the tail window.

Keeping both ends preserves the command echo at the top and the verdict at
the bottom (exit codes, test summaries), which is what agents read.
"""

from __future__ import annotations

from domain.content_blocks import text_view
from domain.context import Item
from domain.item_cost import tokens_of
from domain.policy import Policy


def cut_middle(text: str, cap: int) -> tuple[str, int]:
    """``text`` cut to about ``cap`` chars, and how many chars were cut."""
    if len(text) <= cap:
        return text, 0
    cut = len(text) - cap
    head = cap // 2
    tail = cap - head
    marker = f"\n[… {cut} chars cut by ctxstore …]\n"
    return text[:head] + marker + text[len(text) - tail :], cut


def cap_item(item: Item, policy: Policy) -> str | None:
    """Cap a new tool item's result in place; the audit inputs if it was cut.

    The cap is how a node becomes an item, so from generation 2 it applies to
    a pinned node too: a pin locks the item from then on.  Before, a pinned
    node skipped it, and a retry that re-derived a pinned, capped result
    brought it back uncapped.
    """
    if item.role != "tool" or (item.locked and policy.generation < 2):
        return None
    original = len(item.rendered)
    if item.blocks:  # each text block on its own; images and documents stay whole
        blocks, cut = [], 0
        for block in item.blocks:
            if block["type"] == "text":
                text, cut_here = cut_middle(block["text"], policy.result_cap)
                cut += cut_here
                block = {**block, "text": text} if cut_here else block
            blocks.append(block)
        if not cut:
            return None
        item.blocks = blocks
        item.rendered = text_view(blocks)
    else:
        item.rendered, cut = cut_middle(item.rendered, policy.result_cap)
        if not cut:
            return None
    item.truncated = True
    item.tokens = tokens_of(item, policy)
    return f"result {original} chars > cap {policy.result_cap}; cut {cut}"
