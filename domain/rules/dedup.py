"""Deduplication: a tool result equal to an earlier one still shown renders as a reference.

Agents re-read the same file and re-run the same listing; the second copy
tells the model nothing the first did not.  The new item shows a one-line
reference to the earlier call instead (its state stays ``full``: nothing
was aged), audited as rule ``dedup``.  Only results the reference is much
shorter than are replaced, and only while the earlier one is shown in full:
when it ages, clears or folds, the reference gets its result back
(``WorkingContext._release``).  Policy ``dedup_tool_results`` switches it.
"""

from __future__ import annotations

from domain.call_ids import item_call_id
from domain.context import Item
from domain.item_cost import tokens_of
from domain.working_context import WorkingContext

MIN_SAVING = 32  # tokens: below this a reference is not worth the indirection


def reference(original: Item) -> str:
    return (f"[same result as the earlier {original.name or 'tool'} call "
            f"{item_call_id(original)}: see it above]")  # fmt: skip


def dedup_result(ctx: WorkingContext, item: Item) -> None:
    """Refer a fresh tool item to an equal earlier result, when that is worth it."""
    policy = ctx.policy
    if policy.generation < 2 or not policy.dedup_tool_results:
        return
    if item.role != "tool" or not item.has_result or item.state != "full" or item.locked:
        return
    original_id = ctx.result_holder(item)
    if original_id is None or original_id == item.item_id:
        return
    original = ctx.items[original_id]
    text = reference(original)
    saved = item.tokens - tokens_of(item, policy, text, blocks=None)
    if saved < MIN_SAVING:
        return
    ctx.refer(item, original, text)
    ctx.audit(item, "full", "full", "dedup",
              f"result equals {original_id}'s, shown in full; {saved} tokens saved")  # fmt: skip
