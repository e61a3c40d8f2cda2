"""PostgreSQL appends in one statement that commits by itself (issue 14).

``projections.pg_events`` locks the events table, notifies and inserts in a
server-side function called in autocommit mode, so the lock is never held
while the client process waits for its GIL.  What must not change: a reader
tailing the log never passes over an id that commits later, a version taken
first is still an IntegrityError, and a store migrated before the function
existed still appends.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from projections.pg_events import UnpipelinedRecorder

WRITERS, EACH = 4, 60


def _event(originator: uuid.UUID, version: int) -> StoredEvent:
    return StoredEvent(originator, version, "tests:Probe", b"{}")


def test_one_statement_appends_and_commits(
    pg_recorder: UnpipelinedRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    originator = uuid.uuid4()
    pg_recorder.insert_events([_event(originator, 1)])  # looks the function up once
    seen: list[tuple[str, bool]] = []
    execute = psycopg.Cursor.execute

    def traced(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self.connection)
        seen.append((text, self.connection.autocommit))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", traced)
    ids = pg_recorder.insert_events([_event(originator, 2), _event(originator, 3)])
    monkeypatch.undo()
    assert len(seen) == 1, seen  # no BEGIN, no separate LOCK, NOTIFY or COMMIT
    text, autocommit = seen[0]
    assert pg_recorder.append_function in text and autocommit
    assert ids is not None and len(ids) == 2 and ids[0] < ids[1]
    stored = pg_recorder.select_events(originator)
    assert [e.originator_version for e in stored] == [1, 2, 3]


def test_a_taken_version_is_still_an_integrity_error(pg_recorder: UnpipelinedRecorder) -> None:
    originator = uuid.uuid4()
    pg_recorder.insert_events([_event(originator, 1)])
    with pytest.raises(IntegrityError):
        pg_recorder.insert_events([_event(uuid.uuid4(), 1), _event(originator, 1)])
    assert len(pg_recorder.select_events(originator)) == 1  # and nothing half-written


def test_a_reader_tailing_the_log_never_passes_over_a_later_commit(
    pg_recorder: UnpipelinedRecorder,
) -> None:
    """Ids are committed in the order they were issued, as with the table lock before."""
    start = pg_recorder.max_notification_id() or 0
    done = threading.Event()
    read: list[int] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(EACH):
                originator = uuid.uuid4()
                pg_recorder.insert_events([_event(originator, 1), _event(originator, 2)])
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    def tail() -> None:
        last = start
        while True:
            finished = done.is_set()
            for note in pg_recorder.select_notifications(last + 1, 1000):
                read.append(note.id)
                last = note.id
            if finished:
                return

    writers = [threading.Thread(target=write) for _ in range(WRITERS)]
    reader = threading.Thread(target=tail)
    reader.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(120)
    done.set()
    reader.join(120)
    assert not errors
    stored = [n.id for n in pg_recorder.select_notifications(start + 1, 10 * WRITERS * EACH)]
    assert len(stored) == 2 * WRITERS * EACH
    assert read == stored  # every id, in order, none skipped and read later


def test_a_store_without_the_function_appends_the_old_way(
    pg_recorder: UnpipelinedRecorder,
) -> None:
    with pg_recorder.datastore.get_connection() as conn:
        conn.execute(f'DROP FUNCTION "{pg_recorder.datastore.schema}".'
                     f'"{pg_recorder.append_function}"')  # fmt: skip
    fresh = UnpipelinedRecorder(
        pg_recorder.datastore, events_table_name=pg_recorder.events_table_name
    )
    originator = uuid.uuid4()
    ids = fresh.insert_events([_event(originator, 1)])
    assert ids is not None and len(ids) == 1
    assert fresh._has_append_function is False
    fresh.create_table()  # what migrate runs: the function is back
    fresh._has_append_function = None
    fresh.insert_events([_event(originator, 2)])
    assert fresh._has_append_function is True
