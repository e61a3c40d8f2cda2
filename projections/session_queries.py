"""Read models about sessions themselves: the paged list, one session, a branch's nodes.

Like ``projections.queries`` these read the projector's indexes (already
caught up by the caller) and the projection tables, and decide nothing.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select

from domain import errors
from domain.catalogue import window_for, window_warnings
from projections import tables as t
from projections.projector import Projector
from projections.queries import head_commit_id, session_row
from projections.records import NodeRow, SessionRow
from projections.store import ProjectionStore

# The list's order, and so its cursor: creation time, then id to break ties.
SessionKey = tuple[float, str]


def encode_cursor(key: SessionKey) -> str:
    """An opaque cursor for "after this session" (its sort key, so it survives deletions)."""
    raw = f"{key[0]!r}|{key[1]}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> SessionKey:
    """The sort key inside a cursor; ``ValueError`` if it is not one this API made."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, _, session_id = raw.partition("|")
        key = (float(created), session_id)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError("not a cursor this API returned") from None
    if not session_id:
        raise ValueError("not a cursor this API returned")
    return key


def _summary(s: SessionRow) -> dict[str, Any]:
    return {"session_id": s.session_id, "title": s.title, "model": s.model, "head": s.head,
            "version": s.version, "running": s.running, "branched_from": s.branched_from,
            "created_at": s.created_at, "compaction": s.compaction}  # fmt: skip


def sessions(
    session_rows: Iterable[SessionRow], limit: int | None = None, after: SessionKey | None = None,
    tenant: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
    """A page of sessions, oldest first, and the cursor of the next page (None at the end).

    Only ``tenant``'s sessions, if one is named (``domain.tenancy``).

    Keyset paging on (created_at, session_id): a session started while a
    client pages sorts after the ones it has seen, so none is skipped or
    shown twice.
    """
    rows = sorted((s for s in session_rows if tenant in (None, s.tenant)),
                  key=lambda s: (s.created_at, s.session_id))  # fmt: skip
    if after is not None:
        rows = [s for s in rows if (s.created_at, s.session_id) > after]
    if limit is None or len(rows) <= limit:
        return [_summary(s) for s in rows], None
    page = rows[:limit]
    last = page[-1]
    return [_summary(s) for s in page], encode_cursor((last.created_at, last.session_id))


def session_info(projector: Projector, store: ProjectionStore, session_id: str) -> dict[str, Any]:
    """One session: what it is, where its head is, and how much it holds."""
    s = session_row(projector, session_id)
    window, source = window_for(s.model, s.context_window)
    with store.engine.connect() as conn:
        commits = conn.execute(
            select(func.count())
            .select_from(t.commits)
            .where(t.commits.c.session_id == s.session_id)
        ).scalar_one()
        usage = conn.execute(select(func.count()).select_from(t.usage)
                             .where(t.usage.c.session_id == s.session_id)).scalar_one()  # fmt: skip
    return {
        **_summary(s), "context_window": s.context_window, "window": window,
        "window_source": source, "warnings": window_warnings(s.model, s.context_window),
        "pinned": list(s.pinned), "tools": s.tools,
        "head_commit_id": head_commit_id(projector, s),
        "counts": {"nodes": projector.dag.counts.get(s.session_id, 0),
                   "commits": int(commits), "events": s.version, "usage": int(usage)},
    }  # fmt: skip


def branch_nodes(projector: Projector, session_id: str, head: str | None = None) -> dict[str, Any]:
    """The nodes of the branch ending at ``head`` (default: HEAD), oldest first, with content.

    The branch is the head's parent chain plus every tool node its
    assistants' calls produced up to the head, including earlier versions
    of a call (a call recorded before its result, say): what a client that
    mirrors the conversation (an agent framework's session) reads back.
    """
    session = session_row(projector, session_id)
    head = head or session.head
    if head is None:
        return {"session_id": session.session_id, "version": session.version, "head": None,
                "nodes": []}  # fmt: skip
    node = projector.dag.resolve(session.session_id, head)
    if node is None:
        raise errors.NodeNotFound(f"unknown node {head!r} in this session", node_id=head)
    return {"session_id": session.session_id, "version": session.version, "head": head,
            "nodes": [_node_json(n) for n in _branch(projector, node)]}  # fmt: skip


def _branch(projector: Projector, head: NodeRow) -> list[NodeRow]:
    dag = projector.dag
    chain = dag.chain(head.key)
    horizon: dict[str, int] = {}
    for node in chain:
        horizon[node.session_id] = max(horizon.get(node.session_id, 0), node.seq)
    horizon[head.session_id] = head.seq
    chosen = {n.key: n for n in chain}
    for node in chain:
        if node.role == "assistant":
            for tool_key in dag.tools_by_caller.get(node.key, []):
                tool = dag.nodes[tool_key]
                if tool.seq <= horizon.get(tool.session_id, -1):
                    chosen[tool_key] = tool
    return sorted(chosen.values(), key=lambda n: (dag.depth(n.session_id), n.seq))


def _node_json(n: NodeRow) -> dict[str, Any]:
    return {"node_id": n.node_id, "session_id": n.session_id, "seq": n.seq, "role": n.role,
            "name": n.name, "input": n.input, "output": n.output, "parent": n.parent,
            "edge": n.edge, "call_id": n.call_id, "reads": list(n.reads),
            "metadata": dict(n.meta), "sibling_of": n.sibling_of,
            "version_kind": n.version_kind, "created_at": n.created_at}  # fmt: skip
