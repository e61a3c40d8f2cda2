"""Read models over the projection: commits, timeline, audit, DAG, occupancy.

Each function reads the projector's indexes (already caught up by the
caller) and the projection tables; none of them writes or decides anything.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from domain import errors
from domain.budget import Budget
from domain.catalogue import window_for
from domain.context import ContextCommit
from domain.policy import Policy
from domain.rules.summarize import with_item_ids
from domain.tokens import count_tokens
from projections import tables as t
from projections.projector import Projector
from projections.records import SessionRow
from projections.store import ProjectionStore, loads


def session_row(projector: Projector, session_id: str) -> SessionRow:
    session = projector.dag.sessions.get(str(session_id))
    if session is None:
        raise errors.SessionNotFound(f"unknown session {session_id}", session_id=str(session_id))
    return session


def head_commit_id(projector: Projector, session: SessionRow) -> str | None:
    return projector.commit_at(session.session_id, session.head) if session.head else None


def load_commit(projector: Projector, store: ProjectionStore, session_id: str,
                commit_id: str) -> ContextCommit:  # fmt: skip
    with store.engine.connect() as conn:
        row = conn.execute(select(t.commits).where(t.commits.c.commit_id == commit_id)).first()
    if row is None or (session_id and row.session_id != str(session_id)):
        raise errors.NotFound(f"unknown commit {commit_id}", commit_id=commit_id)
    items = tuple(projector.items_of(commit_id))
    request = loads(row.summary_request)
    return ContextCommit(
        id=row.commit_id, session_id=row.session_id,
        parent_ids=tuple(json.loads(row.parent_ids)), head_node_id=row.head_node_id,
        rules_version=row.rules_version, total_tokens=row.total_tokens,
        event_id=row.event_id, event_seq=row.event_seq, created_at=row.created_at,
        items=items, summary_request=with_item_ids(request, items) if request else None,
    )  # fmt: skip


def head_commit(projector: Projector, store: ProjectionStore, session_id: str) -> ContextCommit:
    session = session_row(projector, session_id)
    commit_id = head_commit_id(projector, session)
    if commit_id is None:
        raise errors.NotFound("the session has no commit yet: append a node first",
                              session_id=str(session_id))  # fmt: skip
    return load_commit(projector, store, "", commit_id)


def timeline(store: ProjectionStore, session_id: str) -> list[dict[str, Any]]:
    return timeline_after(store, session_id, 0)[0]


def timeline_after(
    store: ProjectionStore, session_id: str, after: int
) -> tuple[list[dict[str, Any]], int]:
    """Entries of commits projected after log position ``after``, and the last one's.

    Commits never change, so a timeline only ever grows at its end: a reader
    that has the entries up to a position needs only the ones after it.
    """
    c = t.commits.c
    query = (
        select(c.commit_id, c.head_node_id, c.parent_ids, c.event_seq, c.total_tokens,
               c.counts, c.rules_version, c.created_at, c.summary_request, c.notification_id)
        .where(c.session_id == str(session_id), c.notification_id > after)
        .order_by(c.notification_id)
    )  # fmt: skip
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    last = rows[-1].notification_id if rows else after
    return [
        {
            "commit_id": r.commit_id,
            "head_node_id": r.head_node_id,
            "parent_ids": json.loads(r.parent_ids),
            "event_seq": r.event_seq,
            "total_tokens": r.total_tokens,
            "counts": json.loads(r.counts),
            "rules_version": r.rules_version,
            "created_at": r.created_at,
            "needs_summary": r.summary_request is not None,
        }  # fmt: skip
        for r in rows
    ], last


def explain(projector: Projector, store: ProjectionStore, session_id: str,
            node_id: str) -> dict[str, Any]:  # fmt: skip
    session = session_row(projector, session_id)
    if node_id not in projector.dag.nodes:
        raise errors.NodeNotFound(f"unknown node {node_id!r}", node_id=node_id)
    c = t.transitions.c
    query = (
        select(t.transitions)
        .where(c.session_id == session.session_id, c.source_node_id == node_id)
        .order_by(c.notification_id, c.ordinal)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    current = None
    commit_id = head_commit_id(projector, session)
    if commit_id:
        for item in projector.items_of(commit_id):
            if item.source_node_id == node_id:
                current = {"item_id": item.item_id, "state": item.state, "locked": item.locked,
                           "reason": item.reason, "tokens": item.tokens}  # fmt: skip
    owner = projector.dag.nodes[node_id].session_id
    if not rows and current is None and owner not in projector.lineage(session.session_id):
        # Another session's node, never brought into this one by attach or merge.
        raise errors.NodeNotFound(f"node {node_id!r} is not part of session "
                                  f"{session.session_id}", node_id=node_id)  # fmt: skip
    return {
        "session_id": session.session_id, "node_id": node_id, "current": current,
        "transitions": [
            {k: getattr(r, k) for k in ("item_id", "from_state", "to_state", "rule",
                                        "rules_version", "event_id", "event_seq",
                                        "commit_id", "inputs")}
            for r in rows
        ],
    }  # fmt: skip


def dag(projector: Projector, session_id: str) -> dict[str, Any]:
    session = session_row(projector, session_id)
    ids = projector.dag.by_seq.get(session.session_id, [])
    nodes = [projector.dag.nodes[i] for i in ids]
    groups: dict[tuple[str | None, str], list[str]] = {}
    for node in nodes:
        slot = node.call_id or "" if node.edge == "caller" else ""
        groups.setdefault((node.parent, slot), []).append(node.node_id)
    out = []
    for node in nodes:
        slot = node.call_id or "" if node.edge == "caller" else ""
        versions = groups[(node.parent, slot)]
        out.append({
            "node_id": node.node_id, "seq": node.seq, "role": node.role, "name": node.name,
            "parent": node.parent, "edge": node.edge, "call_id": node.call_id,
            "version": versions.index(node.node_id) + 1, "versions": len(versions),
            "sibling_ids": versions, "version_kind": node.version_kind,
            "created_at": node.created_at,
        })  # fmt: skip
    return {"session_id": session.session_id, "head": session.head,
            "branched_from": session.branched_from, "running": session.running,
            "pinned": session.pinned, "nodes": out}  # fmt: skip


def budget(projector: Projector, store: ProjectionStore, session_id: str,
           policy: Policy) -> dict[str, Any]:  # fmt: skip
    session = session_row(projector, session_id)
    window, source = window_for(session.model, session.context_window)
    commit_id = head_commit_id(projector, session)
    items = projector.items_of(commit_id) if commit_id else []
    visible = [i for i in items if i.state != "summarized"]
    system = sum(i.tokens for i in visible if i.role == "system")
    tool_names = sorted({i.name or "tool" for i in visible if i.role == "tool"})
    tools = sum(count_tokens(name) + 8 for name in tool_names)
    history = sum(i.tokens for i in visible if i.role != "system")
    split = Budget.split(window, system, tools, policy)
    return {
        "window": window, "window_source": source, "system": split.system,
        "tools": split.tools, "output_reserve": split.output_reserve,
        "history": split.history, "compact_at": split.compact_at,
        "emergency_at": split.emergency_at,
        "used": {"system": system, "tools": tools, "history": history},
        "status": split.status(history), "model": session.model,
    }  # fmt: skip


def occupancy(projector: Projector, store: ProjectionStore, session_id: str) -> dict[str, Any]:
    """Measured when the last usage report is for this graph, else the local estimate."""
    session = session_row(projector, session_id)
    window, _ = window_for(session.model, session.context_window)
    commit_id = head_commit_id(projector, session)
    estimated = projector.commits[commit_id].total_tokens if commit_id else 0
    u = t.usage.c
    query = (
        select(t.usage)
        .where(u.session_id == session.session_id)
        .order_by(u.notification_id.desc())
        .limit(1)
    )
    with store.engine.connect() as conn:
        last = conn.execute(query).first()
    measured = None
    if (
        last is not None
        and last.head_node == session.head
        and (last.notification_id > session.graph_position)
    ):
        measured = last.total_input  # in the provider's own convention (domain.usage)
    return {
        "session_id": session.session_id, "model": session.model, "window": window,
        "head_node_id": session.head, "commit_id": commit_id,
        "total_used": measured if measured is not None else estimated,
        "basis": "measured" if measured is not None else "estimated",
        "estimated": estimated,
        "calibration": round(measured / estimated, 4) if measured is not None and estimated
        else None,
        "request_id": last.request_id if measured is not None and last is not None else None,
    }  # fmt: skip
