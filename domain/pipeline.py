"""The rule pipeline: one ContextCommit step, from new nodes to what it asks for next.

Everything that decides what a commit holds runs here, in this order: nodes
become items (capped, deduplicated), reads restart idle clocks, locks follow
pins, then the rules: tool aging, idle clearing, emergency clearing, the
window guard, and the summary request.  The projection
(``projections.context_commit``) only shapes the result into rows; the
``/budget`` query, forced compaction and the tests call these same
functions, so the numbers they quote are the numbers the rules acted on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from domain.budget import Budget
from domain.call_ids import call_framing
from domain.catalogue import window_for
from domain.context import Item, Natural
from domain.policy import Policy
from domain.rules.batching import run_batched_rules
from domain.rules.dedup import dedup_result
from domain.rules.redact import redact_item
from domain.rules.summarize import summary_request
from domain.rules.tool_aging import age_one
from domain.rules.truncation import cap_item
from domain.rules.window_guard import guard_window
from domain.tokens import node_item_tokens
from domain.tool_specs import definition_tokens, listed_tools, recall_listed, uses
from domain.working_context import WorkingContext

JSON = dict[str, Any]
STRUCTURAL = ("attach", "merge")  # DAG positions, not messages: they have no item


class NodeLike(Protocol):
    """What the pipeline reads of a node (``projections.records.NodeRow`` is one)."""

    node_id: str
    role: str
    name: str | None
    output: Any
    meta: JSON
    reads: list[str]
    created_at: float
    token_counts: JSON | None


class SessionLike(Protocol):
    model: str
    context_window: int | None
    pinned: list[str]
    tools: list[JSON]  # the tools it declared (ToolsDeclared)
    compaction: JSON | None  # CompactionConfigured: its ``recall_tool`` overrides the policy


Texts = Callable[[Any], Natural]  # what an item of a node first shows


@dataclass(frozen=True)
class StepResult:
    summary_request: JSON | None
    over_window: JSON | None


def call_signature(meta: dict[str, Any]) -> str | None:
    """The ``thoughtSignature`` Gemini gave with a tool call, stored in the node's metadata."""
    signature = meta.get("thoughtSignature", meta.get("thought_signature"))
    return signature if isinstance(signature, str) and signature else None


def node_item(node: NodeLike, texts: Natural, ord_: int, pinned: bool,
              first_user: bool, policy: Policy | None = None) -> Item:  # fmt: skip
    """A node as a fresh ``full`` item."""
    rendered, call, blocks, call_id = texts
    if node.role == "tool":
        output = node.output
        is_error = bool(node.meta.get("is_error")) or (
            isinstance(output, dict) and "error" in output
        )
        item = Item(
            item_id=node.node_id, source_node_id=node.node_id, role="tool", state="full",
            rendered=rendered, ord=ord_, touched_at=node.created_at, name=node.name, call=call,
            tokens=node_item_tokens(node.token_counts, rendered, call, node.name, blocks),
            has_result=output is not None, is_error=is_error, locked=pinned, blocks=blocks,
            call_id=call_id, call_signature=call_signature(node.meta),
        )  # fmt: skip
        if policy is not None and policy.generation >= 2:
            item.tokens += call_framing(item)
        return item
    return Item(
        item_id=node.node_id, source_node_id=node.node_id, role=node.role, state="full",
        rendered=rendered, ord=ord_, touched_at=node.created_at, name=node.name, locked=pinned,
        tokens=node_item_tokens(node.token_counts, rendered, None, None, blocks), blocks=blocks,
        is_anchor=node.role == "system" or (node.role == "user" and first_user),
    )  # fmt: skip


def add_node_items(ctx: WorkingContext, new_nodes: Iterable[NodeLike], pinned: set[str],
                   texts: Texts) -> None:  # fmt: skip
    for node in new_nodes:
        if node.role in STRUCTURAL:
            continue
        item = node_item(node, texts(node), ctx.next_ord(), node.node_id in pinned,
                         ctx.first_user is None, ctx.policy)  # fmt: skip
        masked = redact_item(item, ctx.policy)  # before the cap: a cut must not expose half a key
        cut = cap_item(item, ctx.policy)  # before add, so the total counts the capped text
        ctx.add(item)
        if masked:
            ctx.audit(item, "full", "full", "redact", masked)
        if cut:
            ctx.audit(item, "full", "full", "per_item_cap", cut)
        dedup_result(ctx, item)


def touch_reads(ctx: WorkingContext, new_nodes: Iterable[NodeLike]) -> None:
    for node in new_nodes:
        for read in node.reads:
            item = ctx.items.get(read)
            if item is not None:
                ctx.touch(item, node.created_at)


def sync_pins(ctx: WorkingContext, pinned: set[str]) -> None:
    """Locks follow the session's pins; an unpinned tool may now be due for aging.

    Generation 2 also lifts the locks a merge made under generation 1, which
    froze everything before it for good: from the first commit under today's
    rules, those items lock only if pinned, and compact like any other.
    """
    if ctx.policy.generation >= 2:
        for item_id in list(ctx.base_locked):
            held = ctx.items[item_id]
            held.base_locked = False
            ctx.base_locked.discard(item_id)
            ctx.set_locked(held, item_id in pinned)
            if not held.locked:
                age_one(ctx, held)
    for item_id in list(ctx.pin_locked - pinned):
        item = ctx.items.get(item_id)
        if item is not None:
            ctx.set_locked(item, False)
            age_one(ctx, item)
    for item_id in pinned - ctx.pin_locked:
        item = ctx.items.get(item_id)
        if item is not None and not item.locked:
            if item.dedup_of is not None:  # a pin keeps the result itself, not a pointer
                ctx.unrefer(item)
            ctx.set_locked(item, True)


def tool_tokens(ctx: WorkingContext, session: SessionLike) -> int:
    """The tool definitions ``render`` lists (``domain.tool_specs``), counted."""
    if ctx.policy.drop_summarized_tools:
        used = uses(ctx.items.values())
    else:  # every tool the history used is listed: the index already knows them
        used = dict.fromkeys(ctx.tool_names, True)
    recall = recall_listed(session.compaction, ctx.policy.recall_tool)
    return definition_tokens(
        listed_tools(used, session.tools, ctx.policy.drop_summarized_tools, recall)
    )


def budget_of(ctx: WorkingContext, session: SessionLike) -> Budget:
    window, _ = window_for(session.model, session.context_window)
    return Budget.split(window, ctx.system_tokens, tool_tokens(ctx, session), ctx.policy)


def run_rules(ctx: WorkingContext, session: SessionLike, now: float) -> StepResult:
    """The rules, in order, on a context whose items are in place."""
    budget = budget_of(ctx, session)
    run_batched_rules(ctx, budget, now)
    recount = (lambda: tool_tokens(ctx, session)) if ctx.policy.drop_summarized_tools else None
    over = guard_window(ctx, budget, recount) if ctx.policy.generation >= 2 else None
    return StepResult(summary_request(ctx, budget), over)


def apply_step(
    ctx: WorkingContext,
    *,
    session: SessionLike,
    new_nodes: list[Any],
    texts: Texts,
    now: float,
    removes: Iterable[str] = (),
    extra: Callable[[WorkingContext], None] | None = None,
) -> StepResult:
    """One commit's worth of change to ``ctx`` (owned by the caller)."""
    pinned = set(session.pinned)
    for item_id in removes:
        ctx.remove(item_id)
    add_node_items(ctx, new_nodes, pinned, texts)
    if extra is not None:
        # The base may predate a pin (a checkout back to an older head): locks
        # must be current before a summary folds or a merge adopts anything.
        sync_pins(ctx, pinned)
        extra(ctx)
    touch_reads(ctx, new_nodes)
    sync_pins(ctx, pinned)
    return run_rules(ctx, session, now)


def forced_request(items: list[Item], session: SessionLike, policy: Policy) -> JSON | None:
    """'Compact now': the run a summary would fold if history were over the threshold."""
    ctx = WorkingContext.from_items(policy, [i.copy() for i in items])
    budget = budget_of(ctx, session)
    history = max(0, ctx.total_tokens - ctx.system_tokens)
    return summary_request(ctx, replace(budget, compact_at=-1, history=history))


def measure(items: list[Item], session: SessionLike, policy: Policy) -> tuple[Budget, JSON]:
    """The budget of a commit and what its items use of it, as the rules count them."""
    return measure_context(WorkingContext.from_items(policy, items), session)


def measure_context(ctx: WorkingContext, session: SessionLike) -> tuple[Budget, JSON]:
    """``measure`` of a context already built (read only): a warm one equals one
    rebuilt from its items (``domain.working_context``), without the rebuild."""
    budget = budget_of(ctx, session)
    history = ctx.total_tokens - ctx.system_tokens
    used = {"system": ctx.system_tokens, "tools": budget.tools, "history": history}
    return budget, used
