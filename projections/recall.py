"""Recall: search the original content of every node a session's head descends from.

Which nodes: those the head's chain shows (``DagIndex.visible``: across the
branch point into the source, never past it), and, through each attach and
merge on the way, the nodes the attached or merged head showed, and so on.
Their content is searched in ``ctx_recall`` with the database's own full
text engine (FTS5 ``bm25`` on SQLite, ``ts_rank_cd`` on PostgreSQL), best
first, ties in log order.  The engines only see the sessions involved; the
exact set of nodes is checked here, so a retried branch's abandoned line or
a source's nodes after the branch point never answer.

A hit's ``state`` is what the head's commit shows of the node: its own item,
else a copy an attach or merge brought in, else the item in the commit the
attach or merge copied from; a node shown by none of them was folded away
before it was copied (``summarized``).  ``hidden`` keeps only hits whose
state is not ``full``, checked before ``limit`` counts them.  Each hit also
carries ``next_text``, the start of the node after it under the head (the
reply to a question that matched, the result of a call): in a conversation
the words of a question are often asked where its answer is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, bindparam, text

from domain.context import Item
from domain.recall_query import fts5_query, recall_terms, tsquery_text
from projections.projector import Projector
from projections.queries import head_commit_id
from projections.recall_rows import recall_text
from projections.records import NodeRow, SessionRow, node_key
from projections.store import ProjectionStore

FOLDED = "summarized"
# The row's stored vector, which revision 0014's GIN index serves (``recall_index``)
TSVECTOR = "tsv"
_SQLITE = text(
    "SELECT r.notification_id, r.session_id, r.node_id, r.role, "
    "-bm25(ctx_recall_fts) AS score FROM ctx_recall_fts "
    "JOIN ctx_recall r ON r.notification_id = ctx_recall_fts.rowid "
    "WHERE ctx_recall_fts MATCH :q AND r.session_id IN :sessions "
    "ORDER BY bm25(ctx_recall_fts), r.notification_id"
).bindparams(bindparam("sessions", expanding=True))
_POSTGRES = text(
    "SELECT notification_id, session_id, node_id, role, "
    f"ts_rank_cd({TSVECTOR}, query) AS score "
    "FROM ctx_recall, to_tsquery('english', :q) AS query "
    f"WHERE {TSVECTOR} @@ query AND session_id IN :sessions "
    "ORDER BY score DESC, notification_id"
).bindparams(bindparam("sessions", expanding=True))


class _Lineage:
    """The nodes under a head, each with the commit and session its content came through."""

    def __init__(self, projector: Projector) -> None:
        self.projector = projector
        self.nodes: dict[str, tuple[NodeRow, str | None, str]] = {}  # key -> (node, commit, via)
        self.after: dict[str, NodeRow] = {}  # key -> the node after it in its head's order

    def walk(self, head: NodeRow, commit_id: str | None, via: str) -> None:
        dag = self.projector.dag
        stack = [(head, commit_id, via)]
        while stack:
            start, commit, viewer = stack.pop()
            shown = dag.visible(start)
            for node, later in zip(shown, shown[1:], strict=False):
                self.after.setdefault(node.key, later)
            for node in shown:
                if node.key in self.nodes:
                    continue
                self.nodes[node.key] = (node, commit, viewer)
                stack.extend(self._sources(node))

    def _sources(self, node: NodeRow) -> Iterator[tuple[NodeRow, str | None, str]]:
        """The heads an attach or merge node brought in, with the commit each was copied from."""
        if node.role == "attach":
            heads = [(str(node.meta.get("source_session")), str(node.meta.get("source_head")),
                      node.meta.get("commit"))]  # fmt: skip
        elif node.role == "merge":
            heads = [(str(p.get("session_id", node.session_id)), str(p["node_id"]), None)
                     for p in node.meta.get("peers", [])]  # fmt: skip
        else:
            return
        for sid, head_id, commit in heads:
            if sid not in self.projector.dag.sessions:
                continue  # erased: a tombstone stands there
            found = self.projector.dag.resolve(sid, head_id)
            if found is None:
                continue
            if commit not in self.projector.commits:
                commit = self.projector.commit_at(sid, head_id)
            yield found, commit, sid


def _shown(items: list[Item], name: str) -> str | None:
    """The state of the item that stands for the node named ``name`` (``explain``'s choice)."""
    own = [i for i in items if i.source_node_id == name]
    for item in own:
        if item.item_id == name:
            return item.state
    visible = [i for i in own if i.state != FOLDED]
    chosen = visible or own
    return chosen[0].state if chosen else None


def _candidates(conn: Connection, sqlite: bool, terms: list[str],
                sessions: list[str]) -> Iterator[Any]:  # fmt: skip
    if sqlite:
        return iter(conn.execute(_SQLITE, {"q": fts5_query(terms), "sessions": sessions}))
    return iter(conn.execute(_POSTGRES, {"q": tsquery_text(terms), "sessions": sessions}))


def recall(projector: Projector, store: ProjectionStore, session: SessionRow, query: str,
           limit: int, hidden: bool = False) -> dict[str, Any]:  # fmt: skip
    """The ``limit`` best hits for ``query`` among the nodes ``session``'s head descends from;
    with ``hidden``, only those whose state is not ``full``: a search for what the model
    cannot read now, so its few hits are not spent on what is already in the context (the
    question itself, the pending tool call)."""
    terms = recall_terms(query)
    head = projector.dag.resolve(session.session_id, session.head) if session.head else None
    if not terms or head is None:
        return {"hits": []}
    head_commit = head_commit_id(projector, session)
    lineage = _Lineage(projector)
    lineage.walk(head, head_commit, session.session_id)
    sessions = sorted({node.session_id for node, _, _ in lineage.nodes.values()})
    items: dict[tuple[str, str], list[Item]] = {}

    def items_of(commit_id: str | None, viewer: str) -> list[Item]:
        """``commit_id``'s items, named as ``viewer`` names nodes."""
        if commit_id is None:
            return []
        if (commit_id, viewer) not in items:
            items[commit_id, viewer] = projector.items_as(commit_id, viewer)
        return items[commit_id, viewer]

    def state_of(node: NodeRow, via_commit: str | None, via: str) -> str:
        sid = session.session_id
        state = _shown(items_of(head_commit, sid), projector.dag.name_in(sid, node))
        if state is None and via_commit is not None:
            state = _shown(items_of(via_commit, via), projector.dag.name_in(via, node))
        return state or FOLDED

    found: list[tuple[Any, NodeRow, str]] = []
    with store.engine.connect() as conn:
        for row in _candidates(conn, store.is_sqlite, terms, sessions):
            entry = lineage.nodes.get(node_key(row.session_id, row.node_id))
            if entry is None:
                continue
            state = state_of(*entry)
            if hidden and state == "full":
                continue
            found.append((row, entry[0], state))
            if len(found) == limit:
                break
    hits = []
    for row, node, state in found:
        after = lineage.after.get(node.key)
        hits.append({"node_id": node.node_id, "session_id": node.session_id, "role": node.role,
                     "state": state, "score": float(row.score),
                     "text": recall_text(node),  # the node's own (the row keeps no copy)
                     "next_text": recall_text(after) if after else ""})  # fmt: skip
    return {"hits": hits}
