"""Tool aging: tool results older than the last ``tail_turns`` assistant turns.

An aged tool keeps its call (arguments cut to ``args_cap``) so the model still
knows what it did, and its result becomes a one-line semantic stub, which
is most of the saving for the least loss.  Protected tools (todo lists,
searches the agent relies on later) and locked items never age.

With batching on (``Policy.batching``), the tools the boundary passed wait
in ``ctx.pending_aging`` until ``domain.rules.batching`` decides a batch is
worth a cache miss; otherwise they age as soon as the boundary passes them.
"""

from __future__ import annotations

import functools

from domain.context import Item
from domain.item_cost import tokens_of
from domain.tokens import encoding
from domain.working_context import WorkingContext


# Batching prices every still-full tool behind the boundary on each commit
# (``aging_saves``), so without a memo each append re-split every result in
# the history.  A result is immutable and ``str`` caches its hash, so a hit
# costs no pass over the text; the bound is ``count_tokens``' kind.
@functools.lru_cache(maxsize=8192)
def stub(result: str, is_error: bool) -> str:
    text = result.strip()
    if not text:
        return "[tool result: empty]"
    lines = text.splitlines()
    first = lines[0].strip()[:120]
    if is_error:
        return f"[tool error: {first}]"
    if len(lines) == 1:
        return f"[tool result: {first}]"
    return f"[tool result: {len(lines)} lines, first: {first}]"


def cut_args(call: str | None, cap: int) -> str | None:
    if call is None or len(call) <= cap:
        return call
    return call[:cap] + f"… [{len(call) - cap} chars cut]"


# What an aged item would cost, by everything ``tokens_of`` reads of it and of
# the policy, and the encoding it counts with: batching asks again for every
# waiting tool on every commit.
_AGED_TOKENS: dict[tuple[object, ...], int] = {}
_AGED_TOKENS_MAX = 8192


def aging_saves(ctx: WorkingContext, item: Item) -> int:
    """Tokens aging ``item`` would free."""
    policy = ctx.policy
    key = (item.rendered, item.is_error, item.call, item.name, item.role, item.has_result,
           item.call_id, item.item_id, policy.args_cap, policy.generation,
           encoding())  # fmt: skip
    aged = _AGED_TOKENS.get(key)
    if aged is None:
        aged = tokens_of(item, policy, stub(item.rendered, item.is_error),
                         cut_args(item.call, policy.args_cap), None)  # fmt: skip
        if len(_AGED_TOKENS) >= _AGED_TOKENS_MAX:
            _AGED_TOKENS.clear()
        _AGED_TOKENS[key] = aged
    return max(0, item.tokens - aged)


def age_item(ctx: WorkingContext, item: Item, turns: int, why: str = "") -> None:
    policy = ctx.policy
    ctx.rewrite(item, stub(item.rendered, item.is_error), cut_args(item.call, policy.args_cap))
    ctx.set_state(item, "aged", "tool_aging",
                  f"assistant turns since: {turns} > tail {policy.tail_turns}{why}")  # fmt: skip


def agable(ctx: WorkingContext, item: Item) -> bool:
    """A full, unpinned, unprotected tool: one the boundary may age."""
    return (
        item.role == "tool"
        and item.state == "full"
        and not item.locked
        and item.name not in ctx.policy.protected_tools
    )


def eligible(ctx: WorkingContext, item: Item) -> bool:
    """Agable now: not frozen for this commit either."""
    return agable(ctx, item) and item.item_id not in ctx.frozen


def passed_tools(ctx: WorkingContext) -> list[Item]:
    """Agable tools the tail boundary moved past since the last step.

    The boundary can also move back (a summary folds assistant turns), and
    then ``aged_upto`` follows it; a context loaded from stored rows starts
    from the beginning (``WorkingContext.from_items``), so a warm context
    and a cold one find the same tools.
    """
    boundary = ctx.tail_boundary()
    if boundary is None:
        ctx.aged_upto = -1
        return []
    if boundary <= ctx.aged_upto:
        ctx.aged_upto = boundary
        return []
    passed = [item for item in ctx.in_order(ctx.aged_upto, boundary) if agable(ctx, item)]
    ctx.aged_upto = boundary
    return passed


def age_tools(ctx: WorkingContext) -> None:
    """Without batching: age what the boundary passed, now.

    A tool frozen in this commit (a merge's base) waits for the next one, as
    a context rebuilt from the stored rows would find it, still full, behind
    the boundary.
    """
    for item in due_tools(ctx):
        age_item(ctx, item, ctx.turns_after(item.ord))


def due_tools(ctx: WorkingContext) -> list[Item]:
    """With batching: every tool waiting to age, oldest first (frozen ones keep waiting)."""
    for item in passed_tools(ctx):
        ctx.pending_aging[item.item_id] = None
    boundary = ctx.tail_boundary()
    due = []
    for item_id in list(ctx.pending_aging):
        waiting = ctx.items.get(item_id)
        if (
            waiting is None
            or boundary is None
            or waiting.ord >= boundary
            or not agable(ctx, waiting)
        ):
            del ctx.pending_aging[item_id]  # gone, back in the tail, aged or pinned
        elif item_id not in ctx.frozen:
            due.append(waiting)
    return sorted(due, key=lambda i: i.ord)


def age_one(ctx: WorkingContext, item: Item) -> None:
    """Re-check one item the boundary already passed (it was just unpinned)."""
    boundary = ctx.tail_boundary()
    if boundary is None or item.ord >= boundary or not eligible(ctx, item):
        return
    if ctx.policy.batching:
        ctx.pending_aging[item.item_id] = None
    else:
        age_item(ctx, item, ctx.turns_after(item.ord))
