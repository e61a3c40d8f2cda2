"""Read models over the projection: commits, timeline, audit, DAG, occupancy.

Each function reads the projector's indexes (already caught up by the
caller) and the projection tables; none of them writes or decides anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, select

from domain import errors
from domain.budget import Budget
from domain.catalogue import window_for, window_warnings
from domain.context import ContextCommit, Item
from domain.pipeline import measure, measure_context
from domain.policy import Policy
from domain.rules.summarize import with_item_ids
from projections import tables as t
from projections.projector import Projector
from projections.records import CommitMeta, NodeRow, SessionRow
from projections.session_rows import SessionRows
from projections.store import ProjectionStore, loads


def session_row(projector: Projector, session_id: str) -> SessionRow:
    session = projector.dag.sessions.get(str(session_id))
    if session is None:
        raise errors.SessionNotFound(f"unknown session {session_id}", session_id=str(session_id))
    if projector.working is not None:
        projector.working.used(session.session_id)
    return session


def head_commit_id(projector: Projector, session: SessionRow) -> str | None:
    return projector.commit_at(session.session_id, session.head) if session.head else None


def load_commit(projector: Projector, store: ProjectionStore, session_id: str,
                commit_id: str, *, copies: bool = True) -> ContextCommit:  # fmt: skip
    """``copies=False``: a warm context's own items, for a caller that only reads them
    under the session's lock (``CommitLookup.items_of``)."""
    row, tools = commit_row(store, commit_id)
    if row is None or (session_id and row.session_id != str(session_id)):
        raise errors.NotFound(f"unknown commit {commit_id}", commit_id=commit_id)
    items = tuple(projector.items_of(commit_id, copies=copies))
    request = loads(row.summary_request)
    return ContextCommit(
        id=row.commit_id, session_id=row.session_id,
        parent_ids=tuple(json.loads(row.parent_ids)), head_node_id=row.head_node_id,
        rules_version=row.rules_version, total_tokens=row.total_tokens,
        event_id=row.event_id, event_seq=row.event_seq, created_at=row.created_at,
        items=items, summary_request=with_item_ids(request, items) if request else None,
        tools=tuple(json.loads(tools)) if tools else (),
    )  # fmt: skip


def commit_row(store: ProjectionStore, commit_id: str) -> tuple[Any, str | None]:
    """A commit's stored row (None if there is none) and its declared tools' JSON.

    Two statements in autocommit on PostgreSQL (``ProjectionStore.reads``), as they
    were two snapshots under READ COMMITTED before: a tool set's row commits with or
    before the first commit naming it, is never changed (its key is its content's
    digest), and is deleted only by an erasure once no commit names it."""
    with store.reads.connect() as conn:
        row = conn.execute(select(t.commits).where(t.commits.c.commit_id == commit_id)).first()
        tools = _tools(conn, row.tools) if row is not None and row.tools else None
    return row, tools


def _tools(conn: Connection, key: str) -> str | None:
    """The declared tools' JSON a commit names by ``key`` (``ctx_tool_sets``)."""
    found: str | None = conn.execute(
        select(t.tool_sets.c.tools).where(t.tool_sets.c.tools_key == key)
    ).scalar()
    return found


def warm_reads(store: ProjectionStore) -> None:
    """Run a cold read's statements once, for a session and a commit that cannot exist.

    SQLAlchemy compiles a statement the first time an engine runs it, and a
    fresh server's first render of a session paid that for each of them
    (issue 29); a server runs this as it starts instead.
    """
    nothing = "-"  # neither a session id (a UUID) nor a commit id (hex)
    rows = SessionRows(store)
    rows.node_rows([nothing])
    rows.commit_metas([nothing])
    store.commit_rows(nothing)
    commit_row(store, nothing)
    with store.reads.connect() as conn:  # which commit_row runs only for a commit it found
        _tools(conn, nothing)


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


AUDIT_FIELDS = ("item_id", "source_node_id", "from_state", "to_state", "rule",
                "rules_version", "event_id", "event_seq", "inputs")  # fmt: skip


def commit_transitions(store: ProjectionStore, session_id: str,
                       commit_id: str) -> dict[str, Any]:  # fmt: skip
    """The audit rows a commit wrote: what changed from its parent, and by which rule.

    Rows are written with the commit's own session, so a commit of another
    session is unknown here, as it is to ``/commits/{cid}``.
    """
    c = t.transitions.c
    query = (
        select(t.transitions)
        .where(c.session_id == str(session_id), c.commit_id == commit_id)
        .order_by(c.notification_id, c.ordinal)
    )
    with store.engine.connect() as conn:
        owner = conn.execute(
            select(t.commits.c.session_id).where(t.commits.c.commit_id == commit_id)
        ).scalar()
        if owner != str(session_id):
            raise errors.NotFound(f"unknown commit {commit_id}", commit_id=commit_id)
        rows = conn.execute(query).all()
    return {"session_id": str(session_id), "commit_id": commit_id,
            "transitions": [{k: getattr(r, k) for k in AUDIT_FIELDS} for r in rows]}  # fmt: skip


def _joins(node: NodeRow) -> list[dict[str, str]]:
    """The heads a merge or attach node brings in: a DAG view's second parents."""
    if node.role == "merge":
        return [{"session_id": str(p.get("session_id", node.session_id)),
                 "node_id": str(p["node_id"])} for p in node.meta.get("peers", [])]  # fmt: skip
    if node.role == "attach":
        return [{"session_id": str(node.meta["source_session"]),
                 "node_id": str(node.meta["source_head"])}]  # fmt: skip
    return []


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
            "created_at": node.created_at, "joins": _joins(node),
        })  # fmt: skip
    return {"session_id": session.session_id, "head": session.head,
            "branched_from": session.branched_from, "running": session.running,
            "pinned": session.pinned, "nodes": out}  # fmt: skip


def _parts(
    projector: Projector,
    session: SessionRow,
    policy_of: Callable[[str], Policy],
    commit_id: str | None = None,
    items: Sequence[Item] | None = None,
) -> tuple[Budget, dict[str, int], CommitMeta | None]:
    """The head's budget and what its items use of it, as the rules count them.

    The policy is the one the head commit was made under (``policy_of`` its
    ``rules_version``), so /budget and /occupancy quote the numbers the rules
    acted on, tool definitions included as the render step lists them.
    """
    commit_id = commit_id or head_commit_id(projector, session)
    meta = projector.commits[commit_id] if commit_id else None
    policy = policy_of(meta.rules_version if meta else "")
    # The projector's warm context of this commit, if it holds one under the same
    # policy, counts the same as one rebuilt from the items (and costs nothing).
    warm = projector.contexts.get(commit_id) if commit_id else None
    if warm is not None and warm.policy == policy:
        split, used = measure_context(warm, session)
        return split, used, meta
    if warm is not None:  # the caller's items may be the warm context's own: copies
        items = None
    if items is None:  # a caller that loaded the commit already passes its items
        items = projector.items_of(commit_id) if commit_id else []
    split, used = measure(list(items), session, policy)
    return split, used, meta


def window_fit_share(
    projector: Projector, session: SessionRow, policy_of: Callable[[str], Policy],
    commit_id: str | None = None, items: Sequence[Item] | None = None,
) -> tuple[dict[str, Any], int, float]:  # fmt: skip
    """``window_fit``, the request's tokens, and the share of ``window - output_reserve``
    they use."""
    split, used, meta = _parts(projector, session, policy_of, commit_id, items)
    limit = split.window - split.output_reserve
    request = used["system"] + used["tools"] + used["history"]
    return _fit(split, used, meta), request, request / limit if limit > 0 else 0.0


def window_fit(projector: Projector, session: SessionRow, policy_of: Callable[[str], Policy],
               commit_id: str | None = None,
               items: Sequence[Item] | None = None) -> dict[str, Any]:  # fmt: skip
    """Whether a commit's request fits the session's window *now*.

    A commit records whether it fitted the window it was made under; a
    checkout (or a branch) can later show an older commit under a smaller
    model's window, and nothing re-runs at a checkout, so the reads check
    again against today's window and say so.
    """
    return _fit(*_parts(projector, session, policy_of, commit_id, items))


def _fit(split: Budget, used: dict[str, int], meta: CommitMeta | None) -> dict[str, Any]:
    limit = split.window - split.output_reserve
    request = used["system"] + used["tools"] + used["history"]
    stored = meta.over_window if meta else None
    if request <= limit:
        return {"over_window": False, "shortfall": 0, "reason": None}
    if stored is not None and stored["shortfall"] == request - limit:
        return {"over_window": True, "shortfall": stored["shortfall"], "reason": stored["reason"]}
    reason = (f"this commit was made under another window: its request needs {request} "
              f"tokens > limit {limit} of the current model; nothing re-runs at a "
              f"checkout: append a node or compact to fit it again")  # fmt: skip
    return {"over_window": True, "shortfall": request - limit, "reason": reason}


def budget(projector: Projector, session_id: str,
           policy_of: Callable[[str], Policy]) -> dict[str, Any]:  # fmt: skip
    """The head commit's budget, counted by the same function the rules count with."""
    session = session_row(projector, session_id)
    window, source = window_for(session.model, session.context_window)
    split, used, meta = _parts(projector, session, policy_of)
    fit = _fit(split, used, meta)
    return {
        "window": window, "window_source": source,
        "warnings": window_warnings(session.model, session.context_window),
        "system": split.system,
        "tools": split.tools, "output_reserve": split.output_reserve,
        "history": split.history, "compact_at": split.compact_at,
        "emergency_at": split.emergency_at, "used": used,
        "status": split.status(used["history"]), "model": session.model,
        "limit": split.window - split.output_reserve,
        "request_tokens": used["system"] + used["tools"] + used["history"],
        "over_window": fit["over_window"], "shortfall": fit["shortfall"],
        "over_window_reason": fit["reason"],
        "commit_id": meta.commit_id if meta else None,
    }  # fmt: skip


def occupancy(projector: Projector, store: ProjectionStore, session_id: str,
              policy_of: Callable[[str], Policy]) -> dict[str, Any]:  # fmt: skip
    """Measured when the last usage report is for this graph, else the local estimate.

    ``breakdown`` splits that same ``total_used`` into system, tool
    definitions and history, next to the output reserve and what is free, so
    a ring and its breakdown read one record and cannot disagree.
    """
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
    split, used, _ = _parts(projector, session, policy_of)
    # The estimate is the commit's items plus the tool definitions the request
    # lists; a provider's measurement covers all of it.
    total = measured if measured is not None else estimated + split.tools
    return {
        "session_id": session.session_id, "model": session.model, "window": window,
        "warnings": window_warnings(session.model, session.context_window),
        "head_node_id": session.head, "commit_id": commit_id,
        "total_used": total,
        "basis": "measured" if measured is not None else "estimated",
        "estimated": estimated,
        "calibration": round(measured / estimated, 4) if measured is not None and estimated
        else None,
        "request_id": last.request_id if measured is not None and last is not None else None,
        "breakdown": breakdown(total, split, used["system"]),
    }  # fmt: skip


def breakdown(total: int, split: Budget, system: int) -> dict[str, Any]:
    """``total`` split so that system + tools + history == total, and the window's rest.

    System prompt and tool definitions are text we count ourselves; history is
    what remains of the total, so a measured total's difference from the
    local estimate shows up in history, the part that varies.  A total below
    even those two (a usage report that cannot be right) splits them in proportion.
    """
    fixed = system + split.tools
    if total >= fixed:
        parts = (system, split.tools, total - fixed)
    else:
        share = total * system // fixed if fixed else 0
        parts = (share, total - share, 0)
    room = split.window - split.output_reserve
    return {
        "system": parts[0], "tools": parts[1], "history": parts[2],
        "output_reserve": split.output_reserve,
        "free": max(0, room - total), "over": max(0, total - room),
        "history_budget": split.history, "compact_at": split.compact_at,
        "emergency_at": split.emergency_at,
    }  # fmt: skip
