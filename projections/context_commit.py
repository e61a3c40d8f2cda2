"""Building a ContextCommit: base commit + one pipeline step, shaped into rows.

For a head we take the nearest commit on its ancestor chain (in the common
case the commit just built for the previous node, still warm in memory) and
run one step of the rule pipeline (``domain.pipeline``) on it; what comes
out is stored as a delta of the items that changed, or as a checkpoint.
The cost is proportional to the new nodes and to the items the rules
actually touch, not to the history.  Nothing here decides what a commit
holds: that is the pipeline's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domain.pipeline import apply_step
from domain.policy import Policy
from domain.rules.summarize import as_range
from domain.working_context import WorkingContext
from projections.item_rows import TextsOf, node_texts, stored_item
from projections.packed_text import pack
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
    commit_id = commit_id_for(event.event_id, head)
    ctx.step_key = commit_id
    result = apply_step(ctx, session=session, new_nodes=new_nodes, texts=node_texts,
                        now=event.at, removes=removes, extra=extra)  # fmt: skip
    request = as_range(result.summary_request) if result.summary_request else None

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
        "items": pack(dumps(payload if is_checkpoint else delta)),
        "summary_request": dumps(request) if request else None,
        "counts": dumps(counts), "notification_id": event.notification_id,
        "over_window": dumps(result.over_window) if result.over_window else None,
        "tools": None,  # the projector names the declared tools in effect
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
    ctx.end_step()
    meta = CommitMeta(commit_id, session.session_id, parent_ids, head, checkpoint, count,
                      event.notification_id, request, ctx.total_tokens,
                      result.over_window, version)  # fmt: skip
    return BuiltCommit(row, transitions, ctx, meta)
