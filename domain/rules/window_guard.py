"""The window guard: every commit's request fits ``window - output_reserve``, or says why not.

The other rules keep a session comfortable when things go as planned:
aging, clearing, and a summary an LLM writes when history passes
``compact_at``.  None of that is guaranteed to happen in time: the summarizer
may be down or compaction off, a single turn may bring 20 KB of tool output,
a merge may bring a whole peer.  So after them, if the request (system +
tool definitions + history, counted as ``/budget`` counts) is still over
the limit, the guard folds without an LLM, with the deterministic
extractive summarizer, in this order, each step only while still over:

1. fold the oldest foldable items outside the tail window into one summary
   (earlier summaries included, so folds nest; pins and system prompts
   stepped over, left where they are), down to ``summary_target`` of the
   history budget, so the next turns have room and the prefix stays put;
2. age the tool results in the tail window, oldest first;
3. clear aged items, oldest first;
4. fold the tail window too, oldest first (even the newest turn);
5. fold the first user message, the one anchor a rule may touch;
6. cut the one summary left down to the room there is.

Pinned items, system prompts and tool definitions are never touched.  If
they alone do not fit, the commit says so: ``over_window`` with the limit,
what the request uses, the shortfall and what it is made of.  A merge's
frozen base yields to the guard: the freeze keeps a prefix stable, the
guard keeps the request sendable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.budget import Budget
from domain.context import Item
from domain.rules.idle_clearing import clear
from domain.rules.summarize import fold_summary, foldable_states, worth_folding
from domain.rules.tool_aging import agable, age_item
from domain.summarizer import ExtractiveSummarizer
from domain.working_context import WorkingContext

RULE = "window_guard"
SUMMARIZER = ExtractiveSummarizer()
SUMMARY_ALLOWANCE = 400  # tokens a fold's own summary may take (1,200 chars at most)
MIN_SUMMARY_TOKENS = 30  # a summary cut to its header line and a marker still takes about this


def guard_window(ctx: WorkingContext, budget: Budget,
                 tools: Callable[[], int] | None = None) -> dict[str, Any] | None:  # fmt: skip
    """Bring the request within the limit; the over-window record if it cannot be.

    ``tools`` counts the tool definitions again as folds go (a policy that
    drops summarized tools' definitions shrinks them); without it they stay
    as the budget counted them.
    """
    limit = budget.window - budget.output_reserve
    count_tools = tools or (lambda: budget.tools)

    def used() -> int:
        return ctx.total_tokens + count_tools()  # system items are part of the total

    if used() <= limit:
        return None
    before = used()
    why = f"; request {before} tokens > limit {limit} (window {budget.window} - reserve " \
          f"{budget.output_reserve})"  # fmt: skip
    tail = ctx.tail_boundary()
    target = count_tools() + ctx.system_tokens + int(budget.history * ctx.policy.summary_target)
    _fold(ctx, lambda: used() - target, why, before_ord=tail if tail is not None else -1)
    if used() > limit:
        for item in ctx.in_order():
            if used() <= limit:
                break
            if agable(ctx, item):
                ctx.frozen.discard(item.item_id)
                age_item(ctx, item, ctx.turns_after(item.ord), why)
    if used() > limit:
        for item in ctx.aged_in_order():
            if used() <= limit:
                break
            if not item.locked:
                ctx.frozen.discard(item.item_id)
                clear(ctx, item.item_id, RULE, f"cleared to fit{why}")
    if used() > limit:
        _fold(ctx, lambda: used() - limit, why)
    if used() > limit:
        _fold(ctx, lambda: used() - limit, why, anchors=True)
    if used() > limit:
        _shrink_summary(ctx, limit - used(), why)
    if used() <= limit:
        return None
    return _over(ctx, count_tools(), limit, used())


def _shrink_summary(ctx: WorkingContext, room: int, why: str) -> None:
    """6. Fold the one summary left into a shorter one that fits, if one can.

    After step 5 only pins, system prompts and one summary remain: if the
    pins alone fit, the summary is what is over, so it gives way to one cut
    to the room left (down to its header line) rather than the commit
    saying it cannot fit.
    """
    loose = [i for i in ctx.iter_visible() if i.state == "summary" and not i.locked
             and i.attached_from is None]  # fmt: skip
    if len(loose) != 1:
        return
    summary = loose[0]
    budget = summary.tokens + room  # what the summary may take to fit: room is negative
    if budget < MIN_SUMMARY_TOKENS:
        return
    chars = max(40, budget * 2)  # about 2 characters a token, at worst, for these lines
    _fold_run(ctx, [summary], why, True, ExtractiveSummarizer(chars), shorten=True)


def _fold(ctx: WorkingContext, need: Callable[[], int], why: str, before_ord: int | None = None,
          anchors: bool = False) -> None:  # fmt: skip
    """Fold the oldest foldable units into one summary, while ``need()`` is positive.

    A unit is one item or a whole attach block.  What may not fold (a pin, a
    system prompt, an anchor, a block a pin holds) is stepped over, not a
    wall: pins every few turns must not leave a summary per gap, none of
    which could fold again.  The run stops at ``before_ord`` (the tail).
    """
    states = foldable_states(ctx.policy)

    def may_fold(item: Item) -> bool:
        own_system = item.role == "system" and item.attached_from is None
        return (item.state in states and not item.locked and not own_system
                and (anchors or not item.is_anchor))  # fmt: skip

    while need() > 0:
        run: list[Item] = []
        gathered, target = 0, need() + SUMMARY_ALLOWANCE
        visible = list(ctx.iter_visible())
        index = 0
        # a lone summary is not worth folding: gather past it
        while index < len(visible) and (gathered < target or not worth_folding(run)):
            item = visible[index]
            stop = index + 1
            if item.attached_from:
                while stop < len(visible) and visible[stop].attached_from == item.attached_from:
                    stop += 1
            unit = visible[index:stop]
            if before_ord is not None and unit[-1].ord >= before_ord:
                break
            if all(may_fold(member) for member in unit):
                run.extend(unit)
                gathered += sum(member.tokens for member in unit)
            index = stop
        if not worth_folding(run):
            return
        _fold_run(ctx, run, why, anchors)


def _fold_run(
    ctx: WorkingContext,
    run: list[Item],
    why: str,
    anchors: bool,
    summarizer: ExtractiveSummarizer = SUMMARIZER,
    shorten: bool = False,
) -> None:
    for item in run:
        ctx.frozen.discard(item.item_id)
    dicts = [{"item_id": i.item_id, "role": i.role, "name": i.name, "rendered": i.rendered}
             for i in run]  # fmt: skip
    if ctx.policy.summary_budget is not None and not shorten:
        # the facts of the run, within the fold's allowance (the "[Summary] " prefix aside)
        text = summarizer.summarize_within(dicts, SUMMARY_ALLOWANCE - 10)
    else:
        text = summarizer.summarize(dicts)
    ctx.folds += 1
    summary_id = f"fold:{ctx.step_key}:{ctx.folds}"
    fold_summary(ctx, summary_id, [i.item_id for i in run], text, summarizer.name,
                 rule=RULE, why=why, anchors=anchors, shorten=shorten)  # fmt: skip


def _over(ctx: WorkingContext, tools: int, limit: int, used: int) -> dict[str, Any]:
    """What is left and why it cannot shrink: only what no rule may touch (or one summary)."""
    visible = list(ctx.iter_visible())
    pinned = sum(i.tokens for i in visible if i.locked and i.role != "system")
    summaries = sum(i.tokens for i in visible if i.state == "summary" and not i.locked)
    other = used - tools - ctx.system_tokens - pinned - summaries
    return {
        "over_window": True, "limit": limit, "used": used, "shortfall": used - limit,
        "reason": (f"what no rule may fold needs {used} tokens > limit {limit}: system "
                   f"{ctx.system_tokens}, tool definitions {tools}, pinned {pinned}, "
                   f"summaries {summaries}, other {other}"),
        "system": ctx.system_tokens, "tools": tools, "pinned": pinned,
        "summaries": summaries, "other": other,
    }  # fmt: skip
