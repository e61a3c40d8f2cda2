"""Follows the event store's notification log into the projection tables.

eventsourcing's SQLite recorder cannot ``subscribe`` (it raises
NotImplementedError), so instead of its threaded ``ProjectionRunner`` we pull
pages from the notification log ourselves, with the same guarantee its
tracking recorders give: the rows of a page and the new tracking position
commit in one transaction.

Sessions are split into ``P`` partitions (``projections.partitions``), each
with its own tracking row, in-memory projector and lock: a batch locks only
its partition, so appends to sessions of different partitions are projected
side by side, by threads of one process or by several processes.  A
partition's batch reads the whole log and applies its own sessions' events.
An attach or merge that reads a session of another partition waits until
that partition has passed the event (``_blocked``), then reads that
session's committed rows older than the event: exactly what one projector
applying the whole log in order would have seen.  P=1 (the default) is one
partition, as before.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from uuid import UUID

from domain import events as ev
from domain.application import CtxStore
from domain.erasure import ERASURE_TOPIC
from domain.policy import Policy
from projections import partitions as parts
from projections.erasure_watch import ErasureWatch
from projections.notification_reads import (
    first_event,
    notification_headers,
    select_notifications,
)
from projections.part_sync import Part, synced
from projections.projector import Projector
from projections.records import Outbox
from projections.store import ProjectionStore

PAGE = 500
# A batch this far behind the log reads only its own events' states (a backlog, a
# rebuild); a live batch of an event or two reads the small states in one query, and
# a large one only if it is the batch's own (``lean_notifications``).
SPARSE_AFTER = 64
SESSION_TOPICS = ("domain.session:", "domain.events:")  # a session's own events
Stop = int | dict[int, int] | None  # how far catch_up may go, everywhere or per partition
WHOLE_STORE = 1 << 62  # a working set budget that never evicts


def _ignore(*_: Any) -> None:
    pass


def _no_span(*_: Any, **__: Any) -> AbstractContextManager[Any]:
    return nullcontext()


def _every(_: Any) -> bool:
    return True


class Processor:
    def __init__(self, app: CtxStore, store: ProjectionStore, policy: Policy,
                 working_set: int | None = None,
                 partitions: int | None = None) -> None:  # fmt: skip
        """``working_set``: hold at most about that many nodes (None: the whole store);
        ``partitions``: P for a store with no tracking rows yet (``CTXSTORE_PARTITIONS``)."""
        self.app = app
        self.store = store
        self.partitions = store.ensure_tracking(
            partitions or parts.configured(postgres=not store.is_sqlite)
        )
        self.partitioner = parts.Partitioner(self.partitions, self._first_event)
        # With several partitions a partition reads other partitions' sessions
        # from their rows, so it needs the working set's lazy lookups.
        lazy = working_set is not None or self.partitions > 1
        self.budget = working_set or 0  # 0: no working set (the whole store)
        # The budget is the process's: each partition holds its share of it (a
        # partition lets its own least recently used sessions go).
        budget = -(-working_set // self.partitions) if working_set else WHOLE_STORE
        self.parts = [Part(i, store, lazy, budget) for i in range(self.partitions)]
        log_position = app.recorder.max_notification_id() or 0
        history = store.record_policy(policy, log_position, self.partitions)
        self.erasures = ErasureWatch(app.recorder, log_position)
        self.starts = [start for start, _ in history]
        self.policies = [p for _, p in history]
        self._batch = threading.local()  # this thread's batch under way, if any
        self.resets = 0  # times another process's erasure made this one start over
        # Told what each batch stored and how far behind a partition was left, for the
        # service's telemetry; projections themselves know nothing of it.
        self.on_stored: Callable[[list[Any], list[Any]], None] = _ignore
        self.on_caught_up: Callable[[int, int], None] = _ignore
        # (partition, sessions held, nodes held, sessions let go) after each batch's trim
        self.on_working_set: Callable[[int, int, int, int], None] = _ignore
        self.trace: Callable[..., AbstractContextManager[Any]] = _no_span

    @property
    def projector(self) -> Projector | None:
        """Partition 0's projector (the only one with P=1); set None to drop them all."""
        return self.parts[0].projector

    @projector.setter
    def projector(self, value: Projector | None) -> None:
        assert value is None, "only dropping is supported"
        for part in self.parts:
            part.projector = None

    def projector_of(self, session_id: object) -> Projector | None:
        """The projector of ``session_id``'s partition (as of its last catch-up)."""
        return self.parts[self.partition_of(session_id)].projector

    def partition_of(self, session_id: object) -> int:
        return self.partitioner.of(session_id)

    @property
    def batch_conn(self) -> Any:
        """The connection of this thread's batch under way (None outside one)."""
        return getattr(self._batch, "conn", None)

    @batch_conn.setter
    def batch_conn(self, conn: Any) -> None:
        self._batch.conn = conn

    def _first_event(self, session_id: UUID) -> Any:
        """A session's first event, for its partition.

        Inside a batch on SQLite it is read through the batch's connection:
        asking the recorder's pool there could wait on a writer that waits
        for the batch's lock (``projections.notification_reads``)."""
        stored = first_event(self.app.recorder, self.batch_conn, session_id)
        return self.app.mapper.to_domain_event(stored) if stored is not None else None

    def _refresh_policies(self, conn: Any) -> None:
        """Take up rules another process recorded, keeping our objects when nothing changed.

        Read inside each batch, under the tracking lock: a process that records
        new rules does so under every partition's lock, from the next
        unprojected event, so no page can be projected under rules older than
        it should.  Caches keyed on a policy object (its rules_version digest,
        the summary-request scan memo) survive from one page to the next only
        if the object does.
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
                 partition: int | None = None, stop: Stop = None) -> int:  # fmt: skip
        """Project every stored event (of ``partition``, if named) not projected yet; how many.

        ``stop``: project no further than that notification (one number for
        every partition, or each partition's own, as an online rebuild
        compares its shadow with live tracking rows).  ``on_page`` hears the
        running count after each committed page (a command line's progress bar).
        """
        if partition is not None:
            return self._catch_up(self.parts[partition], page, on_page, stop)
        return sum(self._catch_up(part, page, on_page, stop) for part in self.parts)

    def reading(self, partition: int) -> None:
        """Before a query: catch up ``partition`` if the log holds anything of it.

        A query needs only its partition's events.  Catching up to the end of
        the log would commit a new position whenever any other partition
        moved: a write and a commit for each read.  So only a read looks
        first, at the log's headers (another partition's large states stay
        unread), from where this process last looked; the next command or
        worker round records the position.
        """
        part = self.parts[partition]
        projector = part.projector  # another thread's failed batch may drop it meanwhile
        if self.partitions == 1 or projector is None:
            self.catch_up(partition=partition)
            return
        with self.store.reads.connect() as conn:  # each page one statement
            while True:
                start = max(projector.position, part.looked) + 1
                notes = notification_headers(self.app.recorder, conn, start, PAGE)
                if any(self._mine(note, partition) for note in notes):
                    break
                if notes:
                    part.looked = max(part.looked, notes[-1].id)
                if len(notes) < PAGE:
                    return
        self.catch_up(partition=partition)

    def _mine(self, note: Any, partition: int) -> bool:
        """Whether a header is an event ``partition`` projects (an erasure rewrites
        every partition's rows)."""
        if note.topic == ERASURE_TOPIC:
            return True
        if not note.topic.startswith(SESSION_TOPICS):
            return False
        return self.partitioner.of(str(note.originator_id)) == partition

    def _catch_up(self, part: Part, page: int, on_page: Callable[[int], None] | None,
                  stop: Stop = None) -> int:  # fmt: skip
        total = 0
        limit = stop.get(part.index, 0) if isinstance(stop, dict) else stop
        while True:
            newest = self.app.recorder.max_notification_id() or 0
            if limit is not None:
                newest = min(newest, limit)
            with part.lock:
                done, blocked = self._run(part, newest, page, on_page, total, limit)
            total += done
            if not blocked:
                projector = part.projector
                if projector is not None:
                    self.on_caught_up(part.index, newest - projector.position)
                return total
            # Outside this partition's lock: the other may be waiting for this one.
            for other in blocked:
                self._catch_up(self.parts[other], page, None, stop)

    def _run(self, part: Part, newest: int, page: int, on_page: Callable[[int], None] | None,
             total: int, stop: int | None = None) -> tuple[int, set[int]]:  # fmt: skip
        """Batches until caught up, or until an event must wait for other partitions."""
        done = 0
        if part.projector is not None and part.projector.position >= newest:
            return 0, set()  # nothing stored since: no need to take the tracking lock
        try:
            while True:
                with self.store.batch(part.index, self.partitions) as (conn, position):
                    part.rows.conn = conn  # the working set reads what the batch sees
                    self._refresh_policies(conn)  # another process may have recorded rules
                    projector = synced(self, part, conn, position)
                    self.batch_conn = conn  # partition lookups read the log through it
                    behind = newest - position > SPARSE_AFTER
                    sparse = self._sparse(part)
                    # about a page of its own events a batch, as with one partition
                    size = page * self.partitions if sparse is not None and behind else page
                    if not behind:  # live: large states only as needed (a partition's own)
                        sparse = sparse or _every
                    notes = (select_notifications(self.app.recorder, conn, position + 1, size,
                                                  stop=stop, needs_state=sparse,
                                                  lean=not behind)
                             if stop is None or position < stop else [])  # fmt: skip
                    if not notes:
                        part.rows.conn = None
                        self.batch_conn = None
                        return done, set()
                    projector.load_rows = lambda cp: self.store.commit_rows(cp, conn)
                    try:
                        with self.trace("ctxstore.rule_pipeline", ctxstore__events=len(notes)):
                            applied, blocked = self._apply(part, projector, notes)
                        self.store.write(conn, projector.outbox, projector.position, part.index)
                        stored = (projector.outbox.commits, projector.outbox.transitions)
                    finally:
                        projector.load_rows = self.store.commit_rows  # outside the batch
                        part.rows.conn = None
                        part.rows.before = None
                        self.batch_conn = None
                self.on_stored(*stored)  # committed
                projector.outbox = Outbox()
                projector.pending.clear()
                if projector.working is not None:
                    working = projector.working
                    working.stored()
                    evicted = working.trim()
                    self.on_working_set(part.index, len(working.loaded), working.held_nodes(),
                                        evicted)  # fmt: skip
                done += applied
                if on_page is not None:
                    on_page(total + done)
                if blocked or len(notes) < size:
                    return done, blocked
        except BaseException:
            part.projector = None  # memory may be ahead of what committed: rebuild it
            part.rows.conn = None
            self.batch_conn = None
            raise

    def _sparse(self, part: Part) -> Callable[[Any], bool] | None:
        """Which notifications' states a batch of ``part`` must read: its own sessions'
        events, and every session's start (where a branch's partition is found).
        None with one partition: then every event is its own."""
        if self.partitions == 1:
            return None

        def needs_state(note: Any) -> bool:
            if not note.topic.startswith(SESSION_TOPICS):
                return False
            if note.originator_version == 1:
                return True
            return self.partitioner.of(str(note.originator_id)) == part.index

        return needs_state

    def _apply(self, part: Part, projector: Projector, notes: Any) -> tuple[int, set[int]]:
        """Apply this partition's events of ``notes``; how many were read, and what
        other partitions must catch up first if an event has to wait for them."""
        read = 0
        for note in notes:
            event = None
            if self.partitions > 1:
                event, home = self._home(note)
                if home != part.index:
                    projector.position = note.id
                    read += 1
                    continue
            if event is None:
                event = self.app.mapper.to_domain_event(note)
            blocked = self._blocked(part, event, note.id) if self.partitions > 1 else set()
            if blocked:
                return read, blocked
            projector.apply(event, note.id)
            if part.rows.before is not None:  # what it read of another partition goes again
                part.release_foreign(projector, self.partitioner)
                part.rows.before = None
            read += 1
        return read, set()

    def _home(self, note: Any) -> tuple[Any, int]:
        """The partition of a notification's session (decoding only a session's start).

        Events of other aggregates (node and idempotency claims, erasure
        records) project nothing; every partition passes over them (-1)."""
        if not note.topic.startswith(SESSION_TOPICS):
            return None, -1
        if note.originator_version == 1:  # Session.Started: where it branched from
            event = self.app.mapper.to_domain_event(note)
            sid = str(note.originator_id)
            return event, self.partitioner.started(sid, getattr(event, "branched_from", None))
        return None, self.partitioner.of(str(note.originator_id))

    def _blocked(self, part: Part, event: Any, note_id: int) -> set[int]:
        """Other partitions an attach or merge reads that have not passed it yet."""
        if isinstance(event, ev.AttachStaged):
            others = [event.source_session]
        elif isinstance(event, ev.MergeCompleted):
            others = [p["session_id"] for p in event.peers if p.get("session_id")]
        else:
            return set()
        foreign = {self.partitioner.of(str(s)) for s in others} - {part.index}
        if not foreign:
            return set()
        behind = {
            q for q, at in self.store.positions().items() if q in foreign and at < note_id - 1
        }
        if not behind:
            assert part.projector is not None
            part.release_foreign(part.projector, self.partitioner)
            part.rows.before = note_id  # their rows as they were when the event was made
            part.sync_foreign(part.projector, self.partitioner)
        return behind
