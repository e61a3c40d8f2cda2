"""Re-project a few sessions in place: what an erasure does instead of a full rebuild.

An erasure changes the projection of the erased sessions (their rows go)
and of the sessions that showed copies of them (attach, merge, and every
branch of those, whose commits inherit the copies); every other session's
rows are exactly what a rebuild would give again, because its projection
read nothing of those sessions.  So only the affected sessions' rows are
dropped, and their remaining events are projected again, in log order, on
top of the other sessions' stored rows (``reproject``).

That equals a rebuild only if what those events read of *other* sessions is
the same now as when they were first projected.  Commits are immutable and
found by id, and a head's visible nodes ignore later tools (``dag_index``),
but three lookups are "the newest commit at a node": the start of a branch
(its source's chain and tools), a merge peer, and an attach recorded
without its commit.  ``scope`` therefore adds a branch's source, and a peer
that made a commit at that node after the merge, to the re-projected set,
and closes it again, until it holds every session that could differ.  In
the worst case that is the whole store: a rebuild, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import Notification
from sqlalchemy import Connection, bindparam, select, text

from domain.policy import Policy
from projections import recall_index
from projections import tables as t
from projections.projector import Projector
from projections.records import Outbox, SessionRow
from projections.session_rows import CHUNK, SessionRows
from projections.store import ProjectionStore
from projections.working_set import DEFAULT_BUDGET

PAGE = 500
# Per-session rows, children first (nothing references them, but keep one order).
SESSION_TABLES = (t.transitions, t.usage, t.commits, t.recall, t.nodes, t.sessions)


@dataclass(frozen=True)
class Structural:
    """An attach or merge node: what it copied from, and when."""

    session_id: str
    role: str
    meta: dict[str, Any]
    notification_id: int

    def peers(self) -> list[tuple[str, str | None]]:
        """(session, node) of each source; the node only where the newest commit
        there is looked up when projecting (``None``: a recorded commit id)."""
        if self.role == "attach":
            head = None if self.meta.get("commit") else self.meta.get("source_head")
            return [(str(self.meta.get("source_session", "")), head)]
        return [(str(p.get("session_id", self.session_id)), str(p["node_id"]))
                for p in self.meta["peers"]]  # fmt: skip


def _chunks(values: list[Any]) -> Iterable[list[Any]]:
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


def _lineage(sessions: Mapping[str, SessionRow], session_id: str) -> list[str]:
    out: list[str] = []
    sid: str | None = session_id
    while sid is not None and sid not in out and sid in sessions:
        out.append(sid)
        branched = sessions[sid].branched_from
        sid = branched["session_id"] if branched else None
    return out


def _recommitted(conn: Connection, lineage: list[str], node_id: str, after: int) -> bool:
    """Whether any session of ``lineage`` made a commit at ``node_id`` after ``after``."""
    c = t.commits.c
    query = select(c.commit_id).where(
        c.head_node_id == node_id, c.session_id.in_(lineage), c.notification_id > after
    )
    return conn.execute(query.limit(1)).first() is not None


def scope(conn: Connection, sessions: Mapping[str, SessionRow],
          structural: list[Structural], erased: set[str]) -> list[str]:  # fmt: skip
    """The sessions (not erased) whose rows an erasure of ``erased`` must recompute."""
    children: dict[str, list[str]] = {}
    for sid, row in sessions.items():
        if row.branched_from:
            children.setdefault(row.branched_from["session_id"], []).append(sid)
    chosen: set[str] = set()
    while True:
        gone = chosen | erased
        add: set[str] = set()
        for node in structural:
            if node.session_id in erased:
                continue
            peers = node.peers()
            if node.session_id not in chosen:
                if any(sid in gone for sid, _ in peers):
                    add.add(node.session_id)  # it copied affected content
                continue
            for sid, head in peers:  # an affected session reads a peer's newest commit
                if (head is not None and sid not in gone and sid in sessions
                        and _recommitted(conn, _lineage(sessions, sid), head,
                                         node.notification_id)):  # fmt: skip
                    add.add(sid)
        for sid in chosen:
            add.update(children.get(sid, ()))  # a branch inherits the commits
            branched = sessions[sid].branched_from
            if branched:  # its start reads the source's newest commit and tools
                add.add(branched["session_id"])
        add -= gone
        if not add:
            return sorted(chosen)
        chosen |= add


def tool_keys(conn: Connection, session_ids: list[str]) -> set[str]:
    """The tool sets the commits of ``session_ids`` name (a shared, content-addressed row)."""
    c = t.commits.c
    keys: set[str] = set()
    for chunk in _chunks(session_ids):
        query = select(c.tools).where(c.session_id.in_(chunk), c.tools.is_not(None)).distinct()
        keys.update(conn.execute(query).scalars())
    return keys


def drop(conn: Connection, session_ids: list[str]) -> None:
    """Delete every projection row of ``session_ids``.

    On SQLite, deleting a recall row leaves its words in the FTS5 index's
    older segments (marked deleted) until segments merge: ``recall_index.settle``
    merges them all now, so the erasure's ``VACUUM`` leaves none of them on disk."""
    gone: list[int] = []
    for chunk in _chunks(session_ids):  # while their nodes' rows still stand
        gone += recall_index.unindex(conn, chunk)
    for table in SESSION_TABLES:
        for chunk in _chunks(session_ids):
            conn.execute(table.delete().where(table.c.session_id.in_(chunk)))
    recall_index.settle(conn, gone)


def drop_unused_tool_sets(conn: Connection, keys: set[str]) -> None:
    """Of ``keys``, the tool sets no remaining commit names (a rebuild would not write them)."""
    statement = text(
        "DELETE FROM ctx_tool_sets WHERE tools_key IN :keys AND NOT EXISTS "
        "(SELECT 1 FROM ctx_commits WHERE ctx_commits.tools = ctx_tool_sets.tools_key)"
    ).bindparams(bindparam("keys", expanding=True))
    for chunk in _chunks(sorted(keys)):
        conn.execute(statement, {"keys": chunk})


def reproject(
    store: ProjectionStore, conn: Connection, policy_at: Callable[[int], Policy],
    notes: Iterable[Notification], to_event: Callable[[Notification], Any], position: int,
    budget: int = DEFAULT_BUDGET, partition_of: Callable[[str], int] = lambda _sid: 0,
) -> int:  # fmt: skip
    """Project ``notes`` (the dropped sessions' events, in log order) inside ``conn``.

    The other sessions come in from their stored rows as they are looked up
    (a working set, reading through ``conn``, which sees the drop); each
    re-projected session is written with its partition (``partition_of``),
    and every partition's tracking row is left at ``position`` (the caller
    holds them all).  How many events.
    """
    rows = SessionRows(store)
    rows.conn = conn
    projector = Projector(policy_at, lambda cp: store.commit_rows(cp, conn), rows, budget)
    assert projector.working is not None
    for row in store.rows_after(t.sessions, 0, conn):
        projector.dag.add_session(SessionRow.from_row(row))
    projector.dag.counts.update(rows.node_counts(0))
    count = 0
    page: list[Notification] = []

    def flush() -> None:
        assert projector.working is not None
        store.write(conn, projector.outbox, position, partition_of)
        projector.outbox = Outbox()
        projector.pending.clear()
        projector.working.stored()
        projector.working.trim()

    for note in notes:
        projector.apply(to_event(note), note.id)
        count += 1
        page.append(note)
        if len(page) >= PAGE:
            flush()
            page.clear()
    flush()
    return count


def partitions_of(conn: Connection, sessions: list[str]) -> dict[str, int]:
    """The partition each of ``sessions`` is stored in (read before their rows are dropped)."""
    c = t.sessions.c
    found: dict[str, int] = {}
    for chunk in _chunks(sorted(sessions)):
        query = select(c.session_id, c.partition).where(c.session_id.in_(chunk))
        found.update((str(sid), int(p)) for sid, p in conn.execute(query))
    return found
