"""The working set's reads: one session's rows, and which session holds a commit.

Thin SQL over the projection tables (``projections.working_set`` decides
what to load and when).  Reads go through the batch's own connection while
a batch runs (``conn``), so they see what that transaction sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, func, select

from projections import tables as t
from projections.store import ProjectionStore

CHUNK = 500  # session ids per IN (...) list

# what a commit's metadata holds (``working_set.meta_of``): a cold read loads every
# commit of a session, and each further column cost it per row (issue 29)
META_COLUMNS = (
    "commit_id", "session_id", "parent_ids", "head_node_id", "checkpoint_id", "delta_count",
    "notification_id", "summary_request", "total_tokens", "over_window", "rules_version",
)  # fmt: skip
_META = [t.commits.c[name] for name in META_COLUMNS]


class SessionRows:
    def __init__(self, store: ProjectionStore) -> None:
        self.store = store
        self.conn: Connection | None = None  # the running batch's, if any
        # While an event reading another partition's session is applied: only rows
        # older than it, so that session is seen as it was when the event was made.
        self.before: int | None = None

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        if self.conn is not None:
            yield self.conn
            return
        with self.store.engine.connect() as own:
            yield own

    def session_of_commit(self, commit_id: str) -> str | None:
        query = select(t.commits.c.session_id).where(t.commits.c.commit_id == commit_id)
        with self._connection() as conn:
            found: str | None = conn.execute(query).scalar()
            return found

    def node_rows(self, session_ids: list[str], after: int = 0) -> list[Any]:
        c = t.nodes.c
        out: list[Any] = []
        # One session's nodes come in the order of its events: the (session, seq)
        # index's own order, read without sorting the rows (a cold read, issue 29).
        # Several sessions' interleave as they were projected.
        order = (c.session_id, c.seq) if len(session_ids) == 1 else (c.notification_id,)
        with self._connection() as conn:
            for start in range(0, len(session_ids), CHUNK):
                query = select(t.nodes).where(
                    c.session_id.in_(session_ids[start : start + CHUNK]), c.notification_id > after
                )
                if self.before is not None:
                    query = query.where(c.notification_id < self.before)
                out.extend(conn.execute(query.order_by(*order)).all())
        return out

    def commit_metas(self, session_ids: list[str], after: int = 0) -> list[Any]:
        """The sessions' commits' metadata rows, their columns in ``META_COLUMNS``'s order
        (``working_set.meta_of``)."""
        c = t.commits.c
        out: list[Any] = []
        with self._connection() as conn:
            for start in range(0, len(session_ids), CHUNK):
                query = select(*_META).where(
                    c.session_id.in_(session_ids[start : start + CHUNK]), c.notification_id > after
                )
                if self.before is not None:
                    query = query.where(c.notification_id < self.before)
                out.extend(conn.execute(query.order_by(c.notification_id)).all())
        return out

    def node_counts(self, after: int, partition: int | None = None) -> dict[str, int]:
        """Nodes each session (of ``partition``, if named) gained after ``after``."""
        c = t.nodes.c
        query = select(c.session_id, func.count()).group_by(c.session_id)
        if after:  # from 0 the (session, seq) index answers without reading a row
            query = query.where(c.notification_id > after)
        if partition is not None:
            query = query.where(c.session_id.in_(
                select(t.sessions.c.session_id).where(t.sessions.c.partition == partition)
            ))  # fmt: skip
        with self._connection() as conn:
            return {sid: int(n) for sid, n in conn.execute(query)}
