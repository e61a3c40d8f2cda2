"""Tool aging: tool results older than the last ``tail_turns`` assistant turns.

An aged tool keeps its call (arguments cut to ``args_cap``) so the model still
knows what it did, and its result becomes a one-line semantic stub, which
is most of the saving for the least loss.  Protected tools (todo lists,
searches the agent relies on later) and locked items never age.
"""

from __future__ import annotations

from domain.context import Item
from domain.tokens import item_tokens
from domain.working_context import WorkingContext


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


def age_item(ctx: WorkingContext, item: Item, turns: int) -> None:
    policy = ctx.policy
    item.call = cut_args(item.call, policy.args_cap)
    item.rendered = stub(item.rendered, item.is_error)
    ctx.retoken(item, item_tokens(item.rendered, item.call, item.name))
    ctx.set_state(item, "aged", "tool_aging",
                  f"assistant turns since: {turns} > tail {policy.tail_turns}")  # fmt: skip


def eligible(ctx: WorkingContext, item: Item) -> bool:
    return (
        item.role == "tool"
        and item.state == "full"
        and not item.locked
        and item.name not in ctx.policy.protected_tools
    )


def age_tools(ctx: WorkingContext) -> None:
    """Age the tool items the tail boundary moved past since the last commit.

    The boundary can also move back (a summary folds assistant turns), and
    then ``aged_upto`` follows it: a context loaded from stored rows starts
    from the current boundary, so a warm one must too, or an item unpinned
    inside the shortened tail would age in one process and not in another.
    """
    boundary = ctx.tail_boundary()
    if boundary is None:
        ctx.aged_upto = -1
        return
    if boundary <= ctx.aged_upto:
        ctx.aged_upto = boundary
        return
    for item in ctx.in_order(ctx.aged_upto, boundary):
        if eligible(ctx, item):
            age_item(ctx, item, ctx.turns_after(item.ord))
    ctx.aged_upto = boundary


def age_one(ctx: WorkingContext, item: Item) -> None:
    """Re-check one item the boundary already passed (it was just unpinned)."""
    boundary = ctx.tail_boundary()
    if boundary is not None and item.ord < boundary and eligible(ctx, item):
        age_item(ctx, item, ctx.turns_after(item.ord))
