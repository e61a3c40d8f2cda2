"""Summarization: choose the oldest foldable run, then fold a recorded summary.

Choosing is part of the projection (deterministic); writing the summary is
not: the text arrives as a ``SummaryRecorded`` event, so a rebuild replays
the recorded answer and never calls an LLM.  Pinned (locked) items and
anchors (system prompts, the first user message) are never folded; an
attach block folds whole or not at all.  One request covers at most
``summary_max_tokens`` (past it by one unit at most, as blocks are whole);
the rest of the way under the target is left to the requests that follow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from domain.budget import Budget
from domain.context import Item
from domain.policy import Policy
from domain.tokens import item_tokens
from domain.working_context import WorkingContext

FOLDABLE = ("full", "aged", "cleared")
WORTH_A_REQUEST = 400  # tokens: folding less than a summary's own size gains nothing
FOLDABLE_V2 = (*FOLDABLE, "summary")  # generation 2: summaries fold into higher-level ones


def foldable_states(policy: Policy) -> tuple[str, ...]:
    return FOLDABLE_V2 if policy.generation >= 2 else FOLDABLE


def foldable(item: Item, ctx: WorkingContext, anchors: bool = False) -> bool:
    """``summary_request`` inlines this test on its hot path: keep the two in step."""
    return (item.state in foldable_states(ctx.policy) and not ctx.locked(item)
            and (anchors or not item.is_anchor))  # fmt: skip


@dataclass(frozen=True)
class ScanMemo:
    """A scan that stopped because its run held ``enough`` tokens.

    Its answer depended only on the visible items up to ``end_ord``, the
    policy, ``enough``, and the tail window starting after ``end_ord``.
    While those hold, the next commit's scan would read the same items and
    stop at the same place, so it is skipped: far over the threshold, with
    compaction off or failing, that scan is ~200 items on every commit.
    """

    policy: Policy
    enough: int
    end_ord: int
    item_ids: list[str]
    tokens: int

    def still_holds(self, ctx: WorkingContext, enough: int, tail_start: int | None) -> bool:
        # Every change to an item passes through ``ctx.changed`` (or
        # ``ctx.removed``), which the builder clears only after the rules ran.
        items, end = ctx.items, self.end_ord
        return (
            self.policy == ctx.policy
            and self.enough == enough
            and (tail_start is None or tail_start > end)
            and not ctx.removed
            and all(items[i].ord > end for i in ctx.changed if i in items)
        )


def summary_request(ctx: WorkingContext, budget: Budget) -> dict[str, Any] | None:
    memo, ctx.request_memo = ctx.request_memo, None  # kept only when renewed below
    used = ctx.total_tokens - ctx.system_tokens
    target = int(budget.history * ctx.policy.summary_target)
    threshold = budget.compact_at
    if ctx.policy.batching and ctx.prefix_changed:
        # The cache misses from here on anyway: fold down to the target now, if
        # that is worth a request, so the next turns append to a settled prefix.
        threshold = min(threshold, target + WORTH_A_REQUEST)
    if used <= threshold:
        return None
    v2 = ctx.policy.generation >= 2
    if v2 and ctx.frozen:
        return None  # a merge commit shows its base as it stood: the next commit asks
    tail = ctx.policy.tail_turns
    if len(ctx.assistant_ords) < tail:
        return None
    tail_start = ctx.assistant_ords[-tail] if tail else None
    need = used - target
    cap = ctx.policy.summary_max_tokens
    enough = need if cap is None else min(need, cap)  # later requests take the rest
    if memo is not None and not ctx.frozen and memo.still_holds(ctx, enough, tail_start):
        ctx.request_memo = memo
        return _request(memo.item_ids, memo.tokens, used, budget, ctx.policy)
    run: list[Item] = []
    folded = 0
    # Units are single items or whole attach blocks, in order.  Summarized
    # items are not visible, so they never break a run, and the lone
    # summaries and anchors before ``foldable_from`` could neither start a
    # run nor end one.  Indexing the visible ords directly, rather than
    # building a list per unit, matters: this runs on every commit over the
    # threshold until a summary is recorded.
    items, by_ord, ords = ctx.items, ctx.by_ord, ctx.visible_ords
    states, frozen = foldable_states(ctx.policy), ctx.frozen
    index, end = ctx.foldable_from(), len(ords)
    while index < end:
        item = items[by_ord[ords[index]]]
        stop = index + 1
        block = item.attached_from
        if block:
            while stop < end and items[by_ord[ords[stop]]].attached_from == block:
                stop += 1
        if tail_start is not None and ords[stop - 1] >= tail_start:
            break  # the tail window, or a block reaching into it, stays as it is
        unit = [item] if stop == index + 1 else [items[by_ord[o]] for o in ords[index:stop]]
        tokens = 0
        for member in unit:
            if (member.state not in states or member.locked or member.is_anchor
                    or member.item_id in frozen):  # fmt: skip
                break  # not foldable: the unit stays
            tokens += member.tokens
        else:
            run.extend(unit)
            folded += tokens
            if folded >= enough and worth_folding(run):
                ids = [item.item_id for item in run]
                if not frozen:  # a scan around a merge's frozen base holds for that commit only
                    ctx.request_memo = ScanMemo(ctx.policy, enough, ords[stop - 1], ids, folded)
                return _request(ids, folded, used, budget, ctx.policy)
            index = stop
            continue
        index = stop
        if v2:
            continue  # a pin or an anchor is stepped over: the run goes on past it
        if run:
            break  # before generation 2 a run ended at anything that could not fold
    if not worth_folding(run):
        return None
    return _request([item.item_id for item in run], folded, used, budget, ctx.policy)


def worth_folding(run: list[Item]) -> bool:
    """Anything but nothing or one summary on its own."""
    return len(run) > 1 or (len(run) == 1 and run[0].state != "summary")


def _request(
    ids: list[str], tokens: int, used: int, budget: Budget, policy: Policy
) -> dict[str, Any]:
    return {
        "item_ids": list(ids),
        "tokens": tokens,
        "reason": f"history {used} tokens > compact at {budget.compact_at} "
        f"({policy.compact_at:.0%} of {budget.history})",
    }


def as_range(request: dict[str, Any]) -> dict[str, Any]:
    """A request as a commit stores it: the run by its two ends and its length.

    The run is every foldable unit between its two ends (``with_item_ids``),
    so its ends and its length name it exactly.  Listing every id instead
    cost about 8 KB per commit for as long as compaction did not run: half
    of all commit rows by size in a 10,000-node session.
    """
    ids = request["item_ids"]
    return {"first_item": ids[0], "last_item": ids[-1], "item_count": len(ids),
            "tokens": request["tokens"], "reason": request["reason"]}  # fmt: skip


def with_item_ids(stored: dict[str, Any], items: Iterable[Item]) -> dict[str, Any]:
    """The inverse of ``as_range``, given the items of the commit that made it.

    The run is every foldable unit between its two ends, in order: an item,
    or a whole attach block, that is not pinned and not an anchor.  What it
    stepped over (generation 2 runs go on past pins and anchors) stays out;
    before generation 2 a run had nothing to step over, so it reads the same.
    """
    if "item_ids" in stored:  # rows written before the range form
        return {"item_ids": list(stored["item_ids"]), "tokens": stored["tokens"],
                "reason": stored["reason"]}  # fmt: skip
    visible = sorted((i for i in items if i.state != "summarized"), key=lambda i: i.ord)
    ords = {i.item_id: i.ord for i in visible}
    first, last = ords.get(stored["first_item"]), ords.get(stored["last_item"])
    ids: list[str] = []
    if first is not None and last is not None:
        span = [i for i in visible if first <= i.ord <= last]
        units: list[list[Item]] = []
        for item in span:
            if item.attached_from and units and units[-1][0].attached_from == item.attached_from:
                units[-1].append(item)
            else:
                units.append([item])
        ids = [m.item_id for unit in units
               if all(m.state in FOLDABLE_V2 and not m.locked and not m.is_anchor for m in unit)
               for m in unit]  # fmt: skip
    if len(ids) != stored["item_count"]:
        ends = f"{stored['first_item']}..{stored['last_item']}"
        raise LookupError(f"summary request {ends} names {stored['item_count']} items, "
                          f"the commit has {len(ids)}")  # fmt: skip
    return {"item_ids": ids, "tokens": stored["tokens"], "reason": stored["reason"]}


def fold_summary(
    ctx: WorkingContext,
    summary_id: str,
    covered: list[str],
    text: str,
    summarizer: str,
    rule: str = "summarize",
    why: str = "",
    anchors: bool = False,
    shorten: bool = False,
) -> Item | None:
    """Fold the covered, still-foldable items into one summary item.

    ``shorten``: a lone summary folds too, into a shorter one (the window
    guard's last step); otherwise refolding one summary alone is pointless.

    Generation 2 places the summary just after the run it covers (a summary of
    summaries would otherwise creep one position back per fold, into the
    item before it) and records its level: one over raw items, one more than
    the highest summary it folds.
    """
    wanted = set(covered)
    present = [ctx.items[i] for i in covered if i in ctx.items]
    blocks: dict[str, list[Item]] = {}
    for item in ctx.ordered() if any(i.attached_from for i in present) else []:
        if item.attached_from:
            blocks.setdefault(item.attached_from, []).append(item)
    chosen = []
    for item in sorted(present, key=lambda i: i.ord):
        if not foldable(item, ctx, anchors):
            continue
        block = blocks.get(item.attached_from or "", [])
        if block and not all(b.item_id in wanted and foldable(b, ctx, anchors) for b in block):
            continue
        chosen.append(item)
    if not chosen or (not shorten and not worth_folding(chosen) and ctx.policy.generation >= 2):
        return None
    prefixed = f"[Summary] {text}"
    v2 = ctx.policy.generation >= 2
    summary = Item(
        item_id=summary_id,
        source_node_id=None,
        role="summary",
        state="summary",
        rendered=prefixed,
        tokens=item_tokens(prefixed),
        ord=free_ord_after(ctx, chosen[-1].ord) if v2 else chosen[0].ord - 1,
        touched_at=chosen[0].touched_at,
        reason=f"summary of {len(chosen)} items by {summarizer}",
        level=1 + max((i.level for i in chosen if i.state == "summary"), default=0) if v2 else 0,
    )
    for item in chosen:
        item.merged_into = summary_id
        ctx.set_state(item, "summarized", rule,
                      f"folded into {summary_id} by {summarizer}{why}")  # fmt: skip
    ctx.add(summary)
    return summary


def free_ord_after(ctx: WorkingContext, ord_: int) -> int:
    """The first position after ``ord_`` that no item holds (items sit ORD_STEP apart)."""
    candidate = ord_ + 1
    while candidate in ctx.by_ord:
        candidate += 1
    return candidate
