"""Follows the event store's notification log into the projection tables.

eventsourcing's SQLite recorder cannot ``subscribe`` (it raises
NotImplementedError), so instead of its threaded ``ProjectionRunner`` we pull
pages from the notification log ourselves, with the same guarantee its
tracking recorders give: the rows of a page and the new tracking position
commit in one transaction.  Any number of processes may run this; the
tracking row lock makes them take turns, and each one first reads the rows
the others wrote since its own position.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from domain.application import CtxStore
from domain.erasure import ERASURE_TOPIC
from domain.policy import Policy
from projections import tables as t
from projections.notification_reads import select_notifications
from projections.projector import Projector
from projections.records import NodeRow, Outbox, SessionRow, node_key
from projections.session_rows import SessionRows
from projections.store import ProjectionStore
from projections.working_set import meta_of

PAGE = 500


class Processor:
    def __init__(self, app: CtxStore, store: ProjectionStore, policy: Policy,
                 working_set: int | None = None) -> None:  # fmt: skip
        """``working_set``: hold at most about that many nodes (None: the whole store)."""
        self.app = app
        self.store = store
        self.rows = SessionRows(store) if working_set is not None else None
        self.budget = working_set or 0
        history = store.record_policy(policy, app.recorder.max_notification_id() or 0)
        self.starts = [start for start, _ in history]
        self.policies = [p for _, p in history]
        self.projector: Projector | None = None
        self.resets = 0  # times another process's erasure made this one start over

    def _refresh_policies(self, conn: Any) -> None:
        """Take up rules another process recorded, keeping our objects when nothing changed.

        Read inside each batch, under the tracking lock: a process that records
        new rules does so under the same lock, from the next unprojected
        event, so no page can be projected under rules older than it should.
        Caches keyed on a policy object (its rules_version digest, the
        summary-request scan memo) survive from one page to the next only if
        the object does.
        """
        history = self.store.policy_history(conn)
        if history and history != list(zip(self.starts, self.policies, strict=True)):
            self.starts = [start for start, _ in history]
            self.policies = [p for _, p in history]

    def policy_of(self, rules_version: str) -> Policy:
        """The policy a commit was made under, by its ``rules_version`` (else the newest)."""
        for policy in reversed(self.policies):
            if policy.rules_version == rules_version:
                return policy
        return self.policies[-1]

    def policy_at(self, notification_id: int) -> Policy:
        index = bisect.bisect_right(self.starts, notification_id) - 1
        return self.policies[max(index, 0)]

    def catch_up(self, page: int = PAGE, on_page: Callable[[int], None] | None = None,
                 stop: int | None = None) -> int:  # fmt: skip
        """Project every stored event not projected yet (up to notification ``stop``
        if given); how many.

        ``on_page`` hears the running count after each committed page (a
        command line's progress bar).
        """
        projector = self.projector
        newest = self.app.recorder.max_notification_id() or 0
        if stop is not None:
            newest = min(newest, stop)
        if projector is not None and projector.position >= newest:
            return 0  # nothing stored since: no need to take the tracking lock
        total = 0
        try:
            while True:
                with self.store.batch() as (conn, position):
                    if self.rows is not None:
                        self.rows.conn = conn  # the working set reads what the batch sees
                    self._refresh_policies(conn)  # another process may have recorded rules
                    projector = self._synced(conn, position)
                    notes = (select_notifications(self.app.recorder, conn, position + 1, page,
                                                  stop=stop)
                             if stop is None or position < stop else [])  # fmt: skip
                    if not notes:
                        if self.rows is not None:
                            self.rows.conn = None
                        break
                    projector.load_rows = lambda cp: self.store.commit_rows(cp, conn)
                    try:
                        for note in notes:
                            projector.apply(self.app.mapper.to_domain_event(note), note.id)
                        self.store.write(conn, projector.outbox, projector.position)
                    finally:
                        projector.load_rows = self.store.commit_rows  # outside the batch
                        if self.rows is not None:
                            self.rows.conn = None
                projector.outbox = Outbox()
                projector.pending.clear()
                if projector.working is not None:
                    projector.working.stored()
                    projector.working.trim()
                total += len(notes)
                if on_page is not None:
                    on_page(total)
                if len(notes) < page:
                    break
        except BaseException:
            self.projector = None  # memory may be ahead of what committed: rebuild it
            if self.rows is not None:
                self.rows.conn = None
            raise
        return total

    def _load_working_set(self, projector: Projector, since: int) -> None:
        """Counts for every session; rows only for the sessions held."""
        assert projector.working is not None and self.rows is not None
        for session_id, gained in self.rows.node_counts(since).items():
            projector.dag.counts[session_id] = projector.dag.counts.get(session_id, 0) + gained
        held = list(projector.working.loaded)
        if not since or not held:
            return  # nothing held yet: sessions come in when first looked up
        for row in self.rows.node_rows(held, since):
            if not dict.__contains__(projector.dag.nodes, node_key(row.session_id, row.node_id)):
                projector.hold_node(NodeRow.from_row(row))
                projector.working.grew(row.session_id)
        for meta in self.rows.commit_metas(held, since):
            projector.hold_commit(meta_of(meta))

    def _synced(self, conn: Any, position: int) -> Projector:
        projector = self.projector
        if (projector is None or projector.position > position
                or self._erased(projector, position, conn)):  # fmt: skip
            projector = Projector(self.policy_at, self.store.commit_rows, self.rows, self.budget)
            projector.position = 0
        if projector.position < position:
            self._load(projector, conn)
            projector.position = position
        self.projector = projector
        return projector

    def _erased(self, projector: Projector, position: int, conn: Any) -> bool:
        """Whether another process erased a session since ``projector`` last caught up.

        An erasure rewrites the projection tables below its own position too
        (``service/erasure.py``), so rows read since are not enough: what this
        process holds in memory may show erased content.  It starts over.
        """
        if projector.position >= position:
            return False
        found = select_notifications(
            self.app.recorder,
            conn,
            projector.position + 1,
            1,
            stop=position,
            topics=[ERASURE_TOPIC],
        )
        if found:
            self.resets += 1
        return bool(found)

    def _load(self, projector: Projector, conn: Any) -> None:
        """Bring the indexes up to date with rows other processes wrote."""
        since = projector.position
        for row in self.store.rows_after(t.sessions, since, conn):
            projector.dag.add_session(SessionRow.from_row(row))
        if projector.working is not None and self.rows is not None:
            self._load_working_set(projector, since)
            return
        for row in self.store.rows_after(t.nodes, since, conn):
            if node_key(row.session_id, row.node_id) not in projector.dag.nodes:
                projector.dag.add(NodeRow.from_row(row))
        for row in self.store.rows_after(t.commits, since, conn):
            raw = dict(row._mapping)
            projector.commits[raw["commit_id"]] = meta_of(raw)
            projector.latest_commit[(raw["session_id"], raw["head_node_id"])] = raw["commit_id"]
