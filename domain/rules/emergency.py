"""Emergency clearing: past ``emergency_at`` of the history budget, every aged
item is cleared at once, without waiting for it to go idle, so the next
request still fits while a summary is being made.
"""

from __future__ import annotations

from domain.budget import Budget
from domain.rules.idle_clearing import clear
from domain.working_context import WorkingContext


def emergency_clear(ctx: WorkingContext, budget: Budget) -> None:
    used = ctx.total_tokens - ctx.system_tokens
    if used <= budget.emergency_at:
        return
    for item in ctx.aged_in_order():  # the aged items, as a walk over ctx.ordered() meets them
        if not ctx.locked(item):
            clear(ctx, item.item_id, "emergency_clearing",
                  f"history {used} tokens > emergency {budget.emergency_at}")  # fmt: skip
