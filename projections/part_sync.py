"""One partition's projector, brought up to date with rows other processes wrote.

Each partition of a process (``projections.processor``) keeps its own
projector.  Before a batch it reads what other processes committed for its
partition since its own position, as a single projector did for the whole
store.  Other partitions' sessions it only borrows: their session rows come
in, when an attach or merge needs them, as far as those partitions' tracking
rows say they are complete (one watermark per partition, since their rows
commit out of step with ours), and
their nodes and commits are read from rows when looked up and let go again
before the next batch, so nothing it holds of them can be stale.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, or_, select

from projections import tables as t
from projections import tracking
from projections.partitions import Partitioner
from projections.projector import Projector
from projections.records import NodeRow, SessionRow, node_key
from projections.session_rows import META_COLUMNS, SessionRows
from projections.store import ProjectionStore
from projections.working_set import meta_of

if TYPE_CHECKING:
    from projections.processor import Processor


class Part:
    """A partition as one process holds it: lock, projector, row source."""

    def __init__(self, index: int, store: ProjectionStore, lazy: bool, budget: int) -> None:
        self.index = index
        self.store = store
        self.lock = threading.RLock()
        self.projector: Projector | None = None
        self.rows = SessionRows(store)
        self.lazy = lazy
        self.budget = budget
        self.seen: dict[int, int] = {}  # other partition -> its session rows read up to
        self.looked = 0  # the log holds nothing of this partition from its position to here

    def release_foreign(self, projector: Projector, partitioner: Partitioner) -> None:
        """Let go every session of another partition that lookups brought in."""
        working = projector.working
        if working is None or partitioner.partitions == 1:
            return
        for session_id in list(working.loaded):
            if partitioner.of(session_id) != self.index:
                del working.loaded[session_id]
                projector.release_session(session_id)

    def sync_foreign(self, projector: Projector, partitioner: Partitioner) -> None:
        """Other partitions' session rows, as far as each is complete (one query for all:
        a batch ran this for every partition that moved, once per append)."""
        if partitioner.partitions == 1:
            return
        conn = self.rows.conn
        assert conn is not None, "inside a batch"
        c = t.sessions.c
        moved = [(other, self.seen.get(other, 0), position)
                 for other, position in tracking.positions(conn).items()
                 if other != self.index and position > self.seen.get(other, 0)]  # fmt: skip
        if not moved:
            return
        query = select(t.sessions).where(or_(*(
            and_(c.partition == other, c.notification_id > since, c.notification_id <= position)
            for other, since, position in moved
        )))  # fmt: skip
        for row in conn.execute(query.order_by(c.notification_id)):
            projector.dag.add_session(SessionRow.from_row(row))
        for other, _, position in moved:
            self.seen[other] = position


def synced(processor: Processor, part: Part, conn: Connection, position: int) -> Projector:
    projector = part.projector
    # Whatever this partition holds, the process may hold erased states: looked for
    # once for all partitions (``projections.erasure_watch``).
    erased = processor.erasures.between(
        conn, None if projector is None else projector.position, position
    )
    if erased and projector is not None:
        processor.resets += 1
    if projector is None or projector.position > position or erased:
        source = part.rows if part.lazy else None
        projector = Projector(processor.policy_at, part.store.commit_rows, source, part.budget)
        projector.position = 0
        part.seen = {}
    part.release_foreign(projector, processor.partitioner)
    if projector.position < position:
        _load(part, projector, conn, processor.partitions > 1)
        projector.position = position
    # Other partitions' session rows too, as far as each is complete: a commit
    # names a node another lineage brought in by its key, which is looked up
    # only in a session the index knows (``DagIndex.find``).
    part.sync_foreign(projector, processor.partitioner)
    part.projector = projector
    return projector


def _load(part: Part, projector: Projector, conn: Connection, split: bool) -> None:
    """Bring the indexes up to date with rows other processes wrote for this partition."""
    since = projector.position
    query = select(t.sessions).where(t.sessions.c.notification_id > since)
    if split:
        query = query.where(t.sessions.c.partition == part.index)
    for row in conn.execute(query.order_by(t.sessions.c.notification_id)):
        projector.dag.add_session(SessionRow.from_row(row))
    if projector.working is not None:
        _load_working_set(part, projector, since, split)
        return
    for row in part.store.rows_after(t.nodes, since, conn):
        if node_key(row.session_id, row.node_id) not in projector.dag.nodes:
            projector.dag.add(NodeRow.from_row(row))
    for row in part.store.rows_after(t.commits, since, conn):
        meta = meta_of([row._mapping[name] for name in META_COLUMNS])
        projector.commits[meta.commit_id] = meta
        projector.latest_commit[(meta.session_id, meta.head_node_id)] = meta.commit_id


def _load_working_set(part: Part, projector: Projector, since: int, split: bool) -> None:
    """Counts for every session; rows only for the sessions held."""
    assert projector.working is not None
    rows = part.rows
    for session_id, gained in rows.node_counts(since, part.index if split else None).items():
        projector.dag.counts[session_id] = projector.dag.counts.get(session_id, 0) + gained
    held = list(projector.working.loaded)
    if not since or not held:
        return  # nothing held yet: sessions come in when first looked up
    for row in rows.node_rows(held, since):
        if not dict.__contains__(projector.dag.nodes, node_key(row.session_id, row.node_id)):
            projector.hold_node(NodeRow.from_row(row))
            projector.working.grew(row.session_id)
    for meta in rows.commit_metas(held, since):
        projector.hold_commit(meta_of(meta))
