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

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composed, Identifier


class UnpipelinedRecorder(PostgresApplicationRecorder):
    """``PostgresApplicationRecorder`` whose inserts never enter pipeline mode
    (named by ``domain.store_config.PG_RECORDER_TOPIC``)."""

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        if self.datastore.enable_db_functions:  # one statement: no pipeline either
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
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
        columns = list(zip(*((e.originator_id, e.originator_version, e.topic, e.state)
                             for e in stored_events), strict=True))  # fmt: skip
        self._lock_table(curs)
        self._notify_channel(curs)
        curs.execute(self._binary_insert(), [list(c) for c in columns])

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
