"""Idle clearing: an aged item nobody read for ``idle_minutes`` is cleared.

"Now" is the timestamp of the event that produced the commit, never the
wall clock, so a rebuild clears exactly what the live run cleared.
"""

from __future__ import annotations

import heapq

from domain.context import Item
from domain.item_cost import tokens_of
from domain.working_context import WorkingContext

PLACEHOLDER = "[cleared: idle tool result]"


def clearing_saves(ctx: WorkingContext, item: Item) -> int:
    return max(0, item.tokens - tokens_of(item, ctx.policy, PLACEHOLDER, blocks=None))


def clear(ctx: WorkingContext, item_id: str, rule: str, inputs: str) -> None:
    item = ctx.items[item_id]
    ctx.rewrite(item, PLACEHOLDER, item.call)
    ctx.set_state(item, "cleared", rule, inputs)


def due_idle(ctx: WorkingContext, now: float) -> list[Item]:
    """Aged items idle for ``idle_minutes`` or more, taken off the idle heap, oldest first.

    Whoever takes them either clears them or hands them back (``keep_idle``).
    """
    limit = ctx.policy.idle_minutes * 60
    heap = ctx.idle_heap
    due: dict[str, Item] = {}
    frozen: list[Item] = []
    while heap and heap[0][0] <= now - limit:
        touched, item_id = heapq.heappop(heap)
        item = ctx.items.get(item_id)
        if item is None or item.state != "aged" or item.locked or item.touched_at != touched:
            continue  # stale entry: superseded, re-touched, pinned or cleared
        if item_id in ctx.frozen:
            frozen.append(item)  # due after this commit
        else:
            due.setdefault(item_id, item)
    keep_idle(ctx, frozen)
    return list(due.values())


def keep_idle(ctx: WorkingContext, items: list[Item]) -> None:
    for item in items:
        heapq.heappush(ctx.idle_heap, (item.touched_at, item.item_id))


def idle_reason(ctx: WorkingContext, item: Item, now: float) -> str:
    idle = (now - item.touched_at) / 60
    minutes = ctx.policy.idle_minutes
    if ctx.policy.generation < 2:  # the text stored before the boundary said what it tests
        return f"untouched for {idle:.1f} min > {minutes:g} min"
    return f"untouched for {idle:.1f} min ≥ {minutes:g} min"


def clear_idle(ctx: WorkingContext, now: float) -> None:
    for item in due_idle(ctx, now):
        clear(ctx, item.item_id, "idle_clearing", idle_reason(ctx, item, now))
