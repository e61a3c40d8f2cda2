"""Cache-aware batching of tool aging and idle clearing.

Providers cache a request's prefix: a call whose request only appends to the
previous one pays about a tenth for everything before the new part.  Aging
one tool result per turn rewrites an early message on almost every call, so
nothing is ever reused.  With batching on, aging and idle clearing wait until
history passes ``batch_trigger`` of its budget and they would free at least
``clear_at_least`` tokens together (as Anthropic's context editing waits for
``clear_at_least``), then run all at once.  Work that is due also runs
whenever the prefix changes anyway in this commit (a summary folded, a retry
replaced a tool, a merge adopted a state), and under pressure (history past
``compact_at``), so batching never lets a request run over.
"""

from __future__ import annotations

from domain.budget import Budget
from domain.rules.emergency import emergency_clear
from domain.rules.idle_clearing import (
    clear,
    clear_idle,
    clearing_saves,
    due_idle,
    idle_reason,
    keep_idle,
)
from domain.rules.thinking import clear_old_thinking, clear_thinking, due_thinking, thinking_saves
from domain.rules.tool_aging import age_item, age_tools, aging_saves, due_tools
from domain.working_context import WorkingContext


def run_batched_rules(ctx: WorkingContext, budget: Budget, now: float) -> None:
    """Tool aging, thinking and idle clearing, emergency clearing: at once, or in batches."""
    if not ctx.policy.batching:
        age_tools(ctx)
        clear_old_thinking(ctx)
        clear_idle(ctx, now)
        emergency_clear(ctx, budget)
        return
    aging = due_tools(ctx)
    thinking = due_thinking(ctx)
    idle = due_idle(ctx, now)
    saves = (sum(aging_saves(ctx, i) for i in aging) + sum(thinking_saves(ctx, i) for i in thinking)
             + sum(clearing_saves(ctx, i) for i in idle))  # fmt: skip
    why = batch_reason(ctx, budget, saves) if aging or idle or thinking else None
    if why is None:
        keep_idle(ctx, idle)
    else:
        for item in aging:
            age_item(ctx, item, ctx.turns_after(item.ord), why)
            del ctx.pending_aging[item.item_id]
        for item in thinking:
            clear_thinking(ctx, item, why)
        for item in idle:
            clear(ctx, item.item_id, "idle_clearing", idle_reason(ctx, item, now) + why)
    emergency_clear(ctx, budget)


def batch_reason(ctx: WorkingContext, budget: Budget, saves: int) -> str | None:
    """Why the waiting work runs now (said in its audit rows), or None to keep waiting."""
    history = ctx.total_tokens - ctx.system_tokens
    if ctx.prefix_changed:
        return "; batch: the prefix changes in this commit anyway"
    if history > budget.compact_at:
        return f"; batch: history {history} tokens > compact at {budget.compact_at}"
    trigger = int(budget.history * ctx.policy.batch_trigger)
    if history > trigger and saves >= ctx.policy.clear_at_least:
        return (f"; batch: frees {saves} tokens >= {ctx.policy.clear_at_least}, "
                f"history {history} tokens > trigger {trigger}")  # fmt: skip
    return None
