"""The PostgreSQL event recorder, without psycopg's pipeline mode.

eventsourcing's ``PostgresApplicationRecorder.insert_events`` sends the
table lock, a NOTIFY and the INSERT in one psycopg pipeline, then calls
``pipeline.sync()``.  With a large event (an 8 MB batch of nodes) libpq
cannot hand the whole INSERT to the socket at once; psycopg's pipeline
loop stops writing once it has no command left to queue, even though
``flush()`` said bytes were still buffered, and then waits only to read.
The server waits for the rest of the INSERT (``ClientRead``) while holding
the events table's EXCLUSIVE lock, so the writer and every other writer
queued on that lock wait forever (issue 13; psycopg issue #685 reported the
same ``ClientRead`` deadlock for large inserts in pipeline mode, fixed then
on pipeline exit only).  Whether it happens depends on how fast the server
reads: under load, a few 8 MB appends beside small ones hang.

Outside pipeline mode psycopg writes until libpq's buffer is empty before
it waits for an answer, so this recorder runs the same statements (the
lock, the NOTIFY, the INSERT ... RETURNING) one after the other in one
transaction: a few more round trips on a connection that is local or
near, the same ordering guarantee (the EXCLUSIVE lock: ids committed in
the order they were issued), and no hang.  eventsourcing's DB-functions
path also avoids the pipeline but takes no table lock, so it was not used.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import (
    InterfaceError,
    Notification,
    OperationalError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composed, Identifier

from projections.pg_payloads import (
    LARGE_STATE,
    PayloadMissing,
    Payloads,
    Stored,
    is_stub,
    resolve,
)

RECHECK = 30.0  # seconds between looks for an append function not found yet
RECENT_BUDGET = 64 * 1024 * 1024  # bytes of large states kept after appending them
RESOLVE_ATTEMPTS = 3  # reads of events whose payloads an erasure deleted in between


class RecentStates:
    """The large states this process appended lately, by notification id.

    The batch that projects an 8 MB event is nearly always the appending
    process's own, moments later: reading the event back took it 50 ms,
    much of it decoding with the interpreter lock held (issue 13).  Only an
    erasure rewrites a stored state, and every process clears this when it
    learns of one (``service/erasure.py``, ``projections/erasure_watch``):
    otherwise the bytes sent are the bytes it would read.
    """

    def __init__(self, budget: int = RECENT_BUDGET) -> None:
        self.budget = budget
        self._states: OrderedDict[int, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def remember(self, ids: Sequence[int], states: Sequence[bytes]) -> None:
        with self._lock:
            for id, state in zip(ids, states, strict=True):
                if len(state) < LARGE_STATE or len(state) > self.budget:
                    continue
                self._states[id] = state
                self._size += len(state)
            while self._size > self.budget:
                self._size -= len(self._states.popitem(last=False)[1])

    def get(self, id: int) -> bytes | None:
        with self._lock:
            return self._states.get(id)

    def clear(self) -> None:
        with self._lock:
            self._states.clear()
            self._size = 0


class UnpipelinedRecorder(PostgresApplicationRecorder):
    """``PostgresApplicationRecorder`` whose inserts never enter pipeline mode
    (named by ``domain.store_config.PG_RECORDER_TOPIC``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.append_function = f"{self.events_table_name.replace('.', '_')}_append"
        self.sql_create_statements.append(self._create_append_function())
        self.payloads = Payloads(self.datastore.schema, self.events_table_name,
                                 self.datastore.originator_id_type)  # fmt: skip
        self.sql_create_statements.extend(self.payloads.create_statements())
        self._has_append_function: bool | None = None  # looked up on the first insert
        self.recent = RecentStates()
        self._recheck_at = 0.0

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        if self.datastore.enable_db_functions:  # one statement: no pipeline either
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
        if stored_events and self._append_function_exists():
            return self._append(stored_events)
        # get_connection turns psycopg's errors into eventsourcing's (IntegrityError
        # for a version or node id taken first), as the pipelined insert did.
        with self.datastore.get_connection() as conn, conn.transaction():
            with conn.cursor() as curs:
                self._insert_events(curs, stored_events, **kwargs)
            if not stored_events:
                return None
            with conn.cursor() as curs:
                self._insert_stored_events(curs, stored_events, **kwargs)
                return self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)

    def _insert_stored_events(
        self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **_: Any
    ) -> None:
        """Lock, notify, insert, with the events sent as binary arrays (``%b``).

        eventsourcing sends them as one array of a composite type, in text:
        escaping an 8 MB ``state`` took 250 ms of regular expressions in
        the client, after the table lock was taken, so every other writer
        waited for it too; bytes in binary need no escaping at all.
        """
        self._lock_table(curs)
        self._notify_channel(curs)
        curs.execute(self._binary_insert(), _columns(stored_events))

    def _append(self, stored_events: Sequence[StoredEvent]) -> list[int]:
        """Lock, notify, insert and commit in one statement of an implicit transaction.

        Sent as separate statements, each step after the lock waited for this
        process to read the last answer and send the next statement, and in a
        busy process that means waiting for the GIL, up to its 5 ms switch
        interval a time: the events table stayed locked for every other
        writer, of every process, meanwhile (two API processes appended no
        faster than one, issue 14).  Here the server takes the lock, inserts
        and commits (the connection is in autocommit mode) without waiting for
        the client at all.
        """
        with self.datastore.get_connection() as conn:
            assert conn.autocommit, "the statement must commit by itself"
            payloads: list[int] = []  # stored so far, each committed
            try:
                stubbed = self.payloads.store(conn, stored_events, payloads)  # outside the lock
                with conn.cursor() as curs:
                    timeout = f"{self.datastore.lock_timeout}s"
                    curs.execute(self._append_call(), [*_columns(stubbed), timeout])
                    ids = [row[self.append_function] for row in curs.fetchall()]
            except BaseException:
                if payloads and not conn.closed:  # the append may have committed: only
                    self.payloads.discard(conn, payloads)  # those no event names go
                raise
        self.recent.remember(ids, [e.state for e in stored_events])
        return ids

    def select_events(self, originator_id: Any, **kwargs: Any) -> Sequence[StoredEvent]:
        return self._resolved(lambda: super(UnpipelinedRecorder, self).select_events(
            originator_id, **kwargs))  # fmt: skip

    def select_notifications(self, *args: Any, **kwargs: Any) -> Sequence[Notification]:
        return self._resolved(lambda: super(UnpipelinedRecorder, self).select_notifications(
            *args, **kwargs))  # fmt: skip

    def _resolved(self, read: Callable[[], Sequence[Stored]]) -> Sequence[Stored]:
        """What ``read`` returns, stubs resolved; read again if an erasure deleted a
        payload between the two queries."""
        for attempt in range(RESOLVE_ATTEMPTS):
            records = read()
            if not any(is_stub(r.state) for r in records):
                return records
            try:
                with self.datastore.get_connection() as conn:
                    return resolve(self.payloads, conn, records)
            except PayloadMissing:
                if attempt == RESOLVE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _append_function_exists(self) -> bool:
        """Whether ``migrate`` created the append function (a store older than it may not
        have been migrated yet: this process appends the old way until it finds it,
        asking again at most every ``RECHECK`` seconds)."""
        if self._has_append_function is None or (
            not self._has_append_function and time.monotonic() >= self._recheck_at
        ):
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute("SELECT to_regproc(format('%%I.%%I', %s::text, %s::text)) "
                             "IS NOT NULL AS found",
                             [self.datastore.schema, self.append_function])  # fmt: skip
                row = curs.fetchone()
                self._has_append_function = bool(row and row["found"])
            self._recheck_at = time.monotonic() + RECHECK
        return self._has_append_function

    def _append_call(self) -> Composed:
        return SQL(
            "SELECT * FROM {schema}.{function}(%b::{id_type}[], %b::bigint[], %b::text[], "
            "%b::bytea[], %s)"
        ).format(
            schema=Identifier(self.datastore.schema),
            function=Identifier(self.append_function),
            id_type=SQL(self.datastore.originator_id_type),
        )

    def _create_append_function(self) -> Composed:
        """The lock, NOTIFY and INSERT of ``_insert_stored_events``, as one server-side call."""
        return SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}("
            "ids {id_type}[], versions bigint[], topics text[], states bytea[], "
            "timeout text) RETURNS SETOF bigint LANGUAGE plpgsql AS $BODY$ "
            "BEGIN "
            "PERFORM set_config('lock_timeout', timeout, true); "
            "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE; "
            "NOTIFY {channel}; "
            "RETURN QUERY INSERT INTO {schema}.{table} "
            "(originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest(ids, versions, topics, states) RETURNING notification_id; "
            "END; $BODY$"
        ).format(
            schema=Identifier(self.datastore.schema),
            function=Identifier(self.append_function),
            id_type=SQL(self.datastore.originator_id_type),
            table=Identifier(self.events_table_name),
            channel=Identifier(self.channel_name),
        )

    def _binary_insert(self) -> Composed:
        return SQL(
            "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest(%b::{id_type}[], %b::bigint[], %b::text[], %b::bytea[]) "
            "RETURNING notification_id"
        ).format(
            schema=Identifier(self.datastore.schema),
            table=Identifier(self.events_table_name),
            id_type=SQL(self.datastore.originator_id_type),
        )


def _columns(stored_events: Sequence[StoredEvent]) -> list[list[Any]]:
    """The events as four column arrays (ids, versions, topics, states), sent binary."""
    rows = ((e.originator_id, e.originator_version, e.topic, e.state) for e in stored_events)
    return [list(column) for column in zip(*rows, strict=True)]


def forget_recent_states(recorder: Any) -> None:
    """Drop what ``RecentStates`` holds (an erasure rewrote or deleted stored states)."""
    recent = getattr(recorder, "recent", None)
    if isinstance(recent, RecentStates):
        recent.clear()
