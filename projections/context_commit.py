"""Building a ContextCommit: base commit + new items + the rule pipeline.

For a head we take the nearest commit on its ancestor chain (in the common
case the commit just built for the previous node, still warm in memory),
add the nodes that are new under this head as ``full`` items, and run the
rules.  The cost is proportional to the new nodes and to the items the rules
actually touch, not to the history.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domain.budget import Budget
from domain.catalogue import window_for
from domain.context import Item
from domain.policy import Policy
from domain.rules.emergency import emergency_clear
from domain.rules.idle_clearing import clear_idle
from domain.rules.summarize import as_range, summary_request
from domain.rules.tool_aging import age_one, age_tools
from domain.rules.truncation import cap_item
from domain.tokens import count_tokens, node_item_tokens
from domain.working_context import WorkingContext
from projections.item_rows import TextsOf, node_texts, stored_item
from projections.records import CommitMeta, EventInfo, NodeRow, SessionRow, dumps

CHECKPOINT_MIN = 64
_VERSIONS: dict[int, tuple[Policy, str]] = {}


def rules_version(policy: Policy) -> str:
    """``policy.rules_version``, hashed once per policy object rather than per use."""
    cached = _VERSIONS.get(id(policy))
    if cached is None or cached[0] is not policy:
        if len(_VERSIONS) >= 64:
            _VERSIONS.clear()
        cached = _VERSIONS[id(policy)] = (policy, policy.rules_version)  # keeps the id alive
    return cached[1]


def node_item(node: NodeRow, ord_: int, pinned: bool, first_user: bool) -> Item:
    """A node as a fresh ``full`` item (structural nodes have no item)."""
    rendered, call = node_texts(node)
    if node.role == "tool":
        output = node.output
        is_error = bool(node.meta.get("is_error")) or (
            isinstance(output, dict) and "error" in output
        )
        return Item(
            item_id=node.node_id, source_node_id=node.node_id, role="tool", state="full",
            rendered=rendered, ord=ord_, touched_at=node.created_at, name=node.name, call=call,
            tokens=node_item_tokens(node.token_counts, rendered, call, node.name),
            has_result=output is not None, is_error=is_error, locked=pinned,
        )  # fmt: skip
    return Item(
        item_id=node.node_id, source_node_id=node.node_id, role=node.role, state="full",
        rendered=rendered, tokens=node_item_tokens(node.token_counts, rendered, None, None),
        ord=ord_, touched_at=node.created_at, name=node.name, locked=pinned,
        is_anchor=node.role == "system" or (node.role == "user" and first_user),
    )  # fmt: skip


def has_user(ctx: WorkingContext) -> bool:
    return ctx.first_user is not None


def add_node_items(ctx: WorkingContext, new_nodes: list[NodeRow], pinned: set[str]) -> None:
    for node in new_nodes:
        if node.role in ("attach", "merge"):
            continue
        item = node_item(node, ctx.next_ord(), node.node_id in pinned, not has_user(ctx))
        cut = cap_item(item, ctx.policy)  # before add, so the total counts the capped text
        ctx.add(item)
        if cut:
            ctx.audit(item, "full", "full", "per_item_cap", cut)


def touch_reads(ctx: WorkingContext, new_nodes: list[NodeRow]) -> None:
    for node in new_nodes:
        for read in node.reads:
            item = ctx.items.get(read)
            if item is not None:
                ctx.touch(item, node.created_at)


def sync_pins(ctx: WorkingContext, pinned: set[str]) -> None:
    """Locks follow the session's pins; an unpinned tool may now be due for aging."""
    for item_id in list(ctx.pin_locked - pinned):
        item = ctx.items.get(item_id)
        if item is not None:
            ctx.set_locked(item, False)
            age_one(ctx, item)
    for item_id in pinned - ctx.pin_locked:
        item = ctx.items.get(item_id)
        if item is not None and not item.locked:
            ctx.set_locked(item, True)


def tool_tokens(ctx: WorkingContext) -> int:
    """Tool definitions as the render step lists them (one per distinct tool)."""
    return sum(count_tokens(name) + 8 for name in ctx.tool_names)


def budget_of(ctx: WorkingContext, session: SessionRow, policy: Policy) -> Budget:
    window, _ = window_for(session.model, session.context_window)
    return Budget.split(window, ctx.system_tokens, tool_tokens(ctx), policy)


def run_rules(ctx: WorkingContext, session: SessionRow, now: float) -> dict[str, Any] | None:
    """The pipeline, in order; returns the summary request, if any."""
    age_tools(ctx)
    clear_idle(ctx, now)
    budget = budget_of(ctx, session, ctx.policy)
    emergency_clear(ctx, budget)
    return summary_request(ctx, budget)


def commit_id_for(event_id: str, head: str) -> str:
    return hashlib.sha256(f"{event_id}|{head}".encode()).hexdigest()[:32]


@dataclass
class BuiltCommit:
    row: dict[str, Any]
    transitions: list[dict[str, Any]]
    ctx: WorkingContext
    meta: CommitMeta  # the row's index entry, without parsing back what was just dumped


def build(
    ctx: WorkingContext,
    *,
    session: SessionRow,
    head: str,
    parent_ids: list[str],
    base_checkpoint: tuple[str, int] | None,
    event: EventInfo,
    new_nodes: list[NodeRow],
    texts_of: TextsOf,
    removes: list[str] = (),  # type: ignore[assignment]
    extra: Callable[[WorkingContext], None] | None = None,
) -> BuiltCommit:
    """Apply one step to ``ctx`` (owned by the caller) and describe the new commit."""
    pinned = set(session.pinned)
    for item_id in removes:
        ctx.remove(item_id)
    add_node_items(ctx, new_nodes, pinned)
    if extra is not None:
        # The base may predate a pin (a checkout back to an older head): locks
        # must be current before a summary folds or a merge adopts anything.
        sync_pins(ctx, pinned)
        extra(ctx)
    touch_reads(ctx, new_nodes)
    sync_pins(ctx, pinned)
    request = run_rules(ctx, session, event.at)
    if request is not None:
        request = as_range(request)

    commit_id = commit_id_for(event.event_id, head)
    version = rules_version(ctx.policy)
    items = ctx.items
    upserts = [stored_item(items[i], texts_of) for i in sorted(ctx.changed) if i in items]
    removed = sorted(ctx.removed)
    delta = {"upserts": upserts, "removes": removed}
    delta_size = len(upserts) + len(removed)
    if base_checkpoint is None:
        checkpoint, count = commit_id, 0
    else:
        checkpoint, count = base_checkpoint[0], base_checkpoint[1] + delta_size
    is_checkpoint = base_checkpoint is None or count > max(CHECKPOINT_MIN, len(ctx.items))
    if is_checkpoint:
        checkpoint, count = commit_id, 0
        payload = [stored_item(item, texts_of) for item in ctx.ordered()]
    counts = ctx.counts()
    row = {
        "commit_id": commit_id, "session_id": session.session_id,
        "parent_ids": dumps(parent_ids), "head_node_id": head,
        "rules_version": version, "total_tokens": ctx.total_tokens,
        "event_id": event.event_id, "event_seq": event.seq, "created_at": event.at,
        "checkpoint_id": checkpoint, "delta_count": count, "is_checkpoint": is_checkpoint,
        "items": dumps(payload if is_checkpoint else delta),
        "summary_request": dumps(request) if request else None,
        "counts": dumps(counts), "notification_id": event.notification_id,
    }  # fmt: skip
    transitions = [
        {
            "notification_id": event.notification_id,
            "session_id": session.session_id,
            "commit_id": commit_id,
            "item_id": t.item_id,
            "source_node_id": t.source_node_id,
            "from_state": t.from_state,
            "to_state": t.to_state,
            "rule": t.rule,
            "rules_version": version,
            "event_id": event.event_id,
            "event_seq": event.seq,
            "inputs": t.inputs,
        }  # fmt: skip
        for t in ctx.transitions
    ]
    ctx.transitions.clear()
    ctx.changed.clear()
    ctx.removed.clear()
    meta = CommitMeta(commit_id, session.session_id, parent_ids, head, checkpoint, count,
                      event.notification_id, request, ctx.total_tokens)  # fmt: skip
    return BuiltCommit(row, transitions, ctx, meta)
