"""Thinking clearing: the thinking of assistant turns older than the last few is dropped.

A model reads its own earlier thinking little or not at all (Anthropic strips
it from earlier turns of most models; its ``clear_thinking`` edit and the
Vercel AI SDK drop it by default), yet signed thinking and encrypted
reasoning are large and counted in full.  So the ``thinking``,
``redacted_thinking`` and ``reasoning`` blocks of an assistant item older than
the last ``keep_thinking_turns`` assistant turns are cleared; its text and
provider compaction blocks stay.  The item keeps its state (only its thinking
goes) and the audit row says how many blocks went and why.

Like tool aging, the items the boundary passed wait in
``ctx.pending_thinking``; with batching on they are cleared with the next batch
(``domain.rules.batching``), so clearing does not cost a cache miss of its own.
"""

from __future__ import annotations

from domain.context import Item
from domain.item_cost import tokens_of
from domain.working_context import WorkingContext

KINDS = ("thinking", "redacted_thinking", "reasoning")


def thinks(item: Item) -> bool:
    """An assistant item, still shown, with thinking to clear."""
    return (
        item.role == "assistant"
        and item.state != "summarized"
        and bool(item.blocks)
        and any(b["type"] in KINDS for b in item.blocks or ())
    )


def thinking_boundary(ctx: WorkingContext) -> int | None:
    """Ord of the oldest assistant turn that keeps its thinking; None keeps all."""
    keep = ctx.policy.keep_thinking_turns
    if keep is None or not ctx.order:
        return None
    if keep == 0:
        return ctx.order[-1] + 1
    if len(ctx.assistant_ords) <= keep:
        return None
    return ctx.assistant_ords[-keep]


def due_thinking(ctx: WorkingContext) -> list[Item]:
    """Items whose thinking is due to go, oldest first (locked and frozen ones wait).

    A context loaded from stored rows starts its scan from the beginning
    (``thought_upto`` is -1), so a warm context and a cold one find the same.
    """
    boundary = thinking_boundary(ctx)
    if boundary is None:
        ctx.thought_upto = -1
        ctx.pending_thinking.clear()
        return []
    if boundary > ctx.thought_upto:  # from the last boundary's own turn, which kept its own
        for item in ctx.in_order(ctx.thought_upto - 1, boundary):
            if thinks(item):
                ctx.pending_thinking[item.item_id] = None
    ctx.thought_upto = boundary
    due = []
    for item_id in list(ctx.pending_thinking):
        waiting = ctx.items.get(item_id)
        if waiting is None or waiting.ord >= boundary or not thinks(waiting):
            del ctx.pending_thinking[item_id]  # gone, back among the kept turns, or cleared
        elif not waiting.locked and item_id not in ctx.frozen:
            due.append(waiting)
    return sorted(due, key=lambda i: i.ord)


def _kept(item: Item) -> list[dict[str, object]] | None:
    kept = [b for b in item.blocks or () if b["type"] not in KINDS]
    return kept or None


def thinking_saves(ctx: WorkingContext, item: Item) -> int:
    return max(0, item.tokens - tokens_of(item, ctx.policy, blocks=_kept(item)))


def clear_thinking(ctx: WorkingContext, item: Item, why: str = "") -> None:
    blocks = item.blocks or []
    kept = _kept(item)
    gone = len(blocks) - len(kept or ())
    item.blocks = kept
    ctx.retoken(item, tokens_of(item, ctx.policy))
    ctx.pending_thinking.pop(item.item_id, None)
    turns = ctx.turns_after(item.ord)
    ctx.audit(item, item.state, item.state, "thinking_clearing",
              f"{gone} thinking blocks; assistant turns since: {turns} >= keep "
              f"{ctx.policy.keep_thinking_turns}{why}")  # fmt: skip


def clear_old_thinking(ctx: WorkingContext) -> None:
    """Without batching: clear what is due, now."""
    for item in due_thinking(ctx):
        clear_thinking(ctx, item)
