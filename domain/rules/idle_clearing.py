"""Idle clearing: an aged item nobody read for ``idle_minutes`` is cleared.

"Now" is the timestamp of the event that produced the commit, never the
wall clock, so a rebuild clears exactly what the live run cleared.
"""

from __future__ import annotations

import heapq

from domain.tokens import item_tokens
from domain.working_context import WorkingContext

PLACEHOLDER = "[cleared: idle tool result]"


def clear(ctx: WorkingContext, item_id: str, rule: str, inputs: str) -> None:
    item = ctx.items[item_id]
    item.rendered = PLACEHOLDER
    ctx.retoken(item, item_tokens(item.rendered, item.call, item.name))
    ctx.set_state(item, "cleared", rule, inputs)


def clear_idle(ctx: WorkingContext, now: float) -> None:
    limit = ctx.policy.idle_minutes * 60
    heap = ctx.idle_heap
    while heap and heap[0][0] <= now - limit:
        touched, item_id = heapq.heappop(heap)
        item = ctx.items.get(item_id)
        if item is None or item.state != "aged" or item.locked or item.touched_at != touched:
            continue  # stale heap entry: superseded, re-touched, locked or already cleared
        idle = (now - touched) / 60
        clear(ctx, item_id, "idle_clearing",
              f"untouched for {idle:.1f} min > {ctx.policy.idle_minutes:g} min")  # fmt: skip
