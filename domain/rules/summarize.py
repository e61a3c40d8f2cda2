"""Summarization: choose the oldest foldable run, then fold a recorded summary.

Choosing is part of the projection (deterministic); writing the summary is
not: the text arrives as a ``SummaryRecorded`` event, so a rebuild replays
the recorded answer and never calls an LLM.  Pinned (locked) items and
anchors (system prompts, the first user message) are never folded; an
attach block folds whole or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from domain.budget import Budget
from domain.context import Item
from domain.tokens import item_tokens
from domain.working_context import WorkingContext

FOLDABLE = ("full", "aged", "cleared")


def foldable(item: Item) -> bool:
    return item.state in FOLDABLE and not item.locked and not item.is_anchor


def _units(items: Iterable[Item]) -> Iterator[list[Item]]:
    """Consecutive items, with each attach block as one unit (lazily: runs stop early)."""
    unit: list[Item] = []
    for item in items:
        if item.state == "summarized":
            continue  # already folded: invisible, so it does not break a run
        if item.attached_from and unit and unit[0].attached_from == item.attached_from:
            unit.append(item)
            continue
        if unit:
            yield unit
        unit = [item]
    if unit:
        yield unit


def summary_request(ctx: WorkingContext, budget: Budget) -> dict[str, Any] | None:
    used = ctx.total_tokens - ctx.system_tokens
    if used <= budget.compact_at:
        return None
    tail = ctx.policy.tail_turns
    if len(ctx.assistant_ords) < tail:
        return None
    tail_start = ctx.assistant_ords[-tail] if tail else None
    target = int(budget.history * ctx.policy.summary_target)
    need = used - target
    run: list[Item] = []
    folded = 0
    # Summarized items never join a unit, and the lone summaries and anchors
    # before ``foldable_from`` could neither start a run nor end one.
    for unit in _units(ctx.iter_visible(ctx.foldable_from())):
        if tail_start is not None and unit[-1].ord >= tail_start:
            break  # the tail window, or a block reaching into it, stays as it is
        if all(foldable(item) for item in unit):
            run.extend(unit)
            folded += sum(item.tokens for item in unit)
            if folded >= need:
                break
        elif run:
            break
    if not run:
        return None
    return {
        "item_ids": [item.item_id for item in run],
        "tokens": folded,
        "reason": f"history {used} tokens > compact at {budget.compact_at} "
        f"({ctx.policy.compact_at:.0%} of {budget.history})",
    }


def fold_summary(
    ctx: WorkingContext, summary_id: str, covered: list[str], text: str, summarizer: str
) -> Item | None:
    """Fold the covered, still-foldable items into one summary item."""
    wanted = set(covered)
    present = [ctx.items[i] for i in covered if i in ctx.items]
    blocks: dict[str, list[Item]] = {}
    for item in ctx.ordered() if any(i.attached_from for i in present) else []:
        if item.attached_from:
            blocks.setdefault(item.attached_from, []).append(item)
    chosen = []
    for item in sorted(present, key=lambda i: i.ord):
        if not foldable(item):
            continue
        block = blocks.get(item.attached_from or "", [])
        if block and not all(b.item_id in wanted and foldable(b) for b in block):
            continue
        chosen.append(item)
    if not chosen:
        return None
    prefixed = f"[Summary] {text}"
    summary = Item(
        item_id=summary_id,
        source_node_id=None,
        role="summary",
        state="summary",
        rendered=prefixed,
        tokens=item_tokens(prefixed),
        ord=chosen[0].ord - 1,
        touched_at=chosen[0].touched_at,
        reason=f"summary of {len(chosen)} items by {summarizer}",
    )
    for item in chosen:
        item.merged_into = summary_id
        ctx.set_state(item, "summarized", "summarize",
                      f"folded into {summary_id} by {summarizer}")  # fmt: skip
    ctx.add(summary)
    return summary
