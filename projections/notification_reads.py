"""Reading the notification log inside a projection batch, on the batch's own connection.

A batch holds SQLite's write lock from its first statement.  eventsourcing's
SQLite recorder hands out its connections through a pool whose requests
queue in arrival order, and whose one writer may at that moment be a
command waiting for the very lock the batch holds: asking that pool for a
reader from inside the batch closes a cycle (batch -> pool queue -> writer
-> SQLite lock -> batch) that only the five-second busy timeout breaks, and
the command that timed out is answered 503 although another one may have
been stored.  On SQLite the batch therefore reads the log itself, through
the connection it already holds, the way the recorder would (same rows,
same order).  PostgreSQL's recorder has no single writer and its insert
lock does not block readers, so it keeps the recorder's own read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification
from psycopg.rows import tuple_row
from sqlalchemy import text

from projections.pg_payloads import LARGE_STATE, is_stub


def select_notifications(recorder: Any, conn: Any, start: int, limit: int,
                         stop: int | None = None, topics: Sequence[str] = (),
                         needs_state: Callable[[Notification], bool] | None = None,
                         lean: bool = False) -> list[Notification]:  # fmt: skip
    """Notifications from ``start`` (inclusive) up to ``stop``, at most ``limit``.

    ``needs_state``: on PostgreSQL, read the states of only those
    notifications it accepts (seeing them with an empty state); the others
    keep an empty one (``sparse_notifications``).  With ``lean``, every
    small state is read at once and only a large one waits for the test
    (``lean_notifications``)."""
    if conn.dialect.name != "sqlite":
        if needs_state is not None and not topics:
            read = lean_notifications if lean else sparse_notifications
            return read(recorder, conn, start, limit, stop, needs_state)
        return list(recorder.select_notifications(start=start, limit=limit, stop=stop,
                                                  topics=topics))  # fmt: skip
    clauses = ["rowid >= :start"]
    params: dict[str, Any] = {"start": start, "limit": limit}
    if stop is not None:
        clauses.append("rowid <= :stop")
        params["stop"] = stop
    if topics:
        names = [f"t{i}" for i in range(len(topics))]
        clauses.append(f"topic IN ({', '.join(':' + n for n in names)})")
        params.update(zip(names, topics, strict=True))
    table = recorder.events_table_name
    statement = text(
        "SELECT rowid, originator_id, originator_version, topic, state "
        f"FROM {table} WHERE {' AND '.join(clauses)} ORDER BY rowid LIMIT :limit"
    )
    return [
        Notification(id=row[0], originator_id=UUID(row[1]), originator_version=row[2],
                     topic=row[3], state=bytes(row[4]))
        for row in conn.execute(statement, params)
    ]  # fmt: skip


def sparse_notifications(
    recorder: Any, conn: Any, start: int, limit: int, stop: int | None,
    needs_state: Callable[[Notification], bool],
) -> list[Notification]:  # fmt: skip
    """The log's headers, and the states of only the notifications ``needs_state`` names.

    A partition's batch reads the whole log and applies only its own
    sessions' events: with P partitions a rebuild read every event's state
    P times, large tool results included, to throw P - 1 of them away (a
    single-process rebuild on 8 partitions took 1.7x as long as on one).
    """
    table = f'"{recorder.datastore.schema}"."{recorder.events_table_name}"'
    where = "notification_id >= %s" + (" AND notification_id <= %s" if stop else "")
    params = [start, stop, limit] if stop else [start, limit]
    # psycopg's own cursor: tuples, not SQLAlchemy rows (a rebuild on P partitions
    # reads every header P times)
    with conn.connection.driver_connection.cursor(row_factory=tuple_row) as curs:
        curs.execute(f"SELECT notification_id, originator_id, originator_version, topic "
                     f"FROM {table} WHERE {where} ORDER BY notification_id LIMIT %s",
                     params)  # fmt: skip
        headers = [Notification(id=i, originator_id=o, originator_version=v, topic=t, state=b"")
                   for i, o, v, t in curs.fetchall()]  # fmt: skip
        wanted = [note.id for note in headers if needs_state(note)]
        if not wanted:
            return headers
        curs.execute(f"SELECT notification_id, state FROM {table} "
                     "WHERE notification_id = ANY(%s)", [wanted], binary=True)  # fmt: skip
        states = {id: bytes(state) for id, state in curs.fetchall()}
        recorder.payloads.fill(curs, states)
    return _with_states(headers, states)


def _with_states(notes: list[Notification], states: dict[int, bytes]) -> list[Notification]:
    """``notes``, each with its state from ``states`` where that has one."""
    return [dataclasses.replace(note, state=states[note.id]) if note.id in states else note
            for note in notes]  # fmt: skip


def lean_notifications(
    recorder: Any, conn: Any, start: int, limit: int, stop: int | None,
    needs_state: Callable[[Notification], bool],
) -> list[Notification]:  # fmt: skip
    """The log with every small state, and only the large states ``needs_state`` names.

    A live batch reads the few events appended since its last, in one query.
    Among them may be another partition's 8 MB tool result: reading it to
    throw it away took 30 ms of that batch, which another session's append
    waited through (issue 13).  PostgreSQL knows a stored value's length
    without reading it.  A large state this process appended comes from
    ``recorder.recent``; others are read in binary, which psycopg copies,
    where the text format's hex took it milliseconds of the interpreter lock
    to decode.
    """
    table = f'"{recorder.datastore.schema}"."{recorder.events_table_name}"'
    where = "notification_id >= %s" + (" AND notification_id <= %s" if stop else "")
    params = [LARGE_STATE, start, stop, limit] if stop else [LARGE_STATE, start, limit]
    recent = getattr(recorder, "recent", None)
    with conn.connection.driver_connection.cursor(row_factory=tuple_row) as curs:
        curs.execute(f"SELECT notification_id, originator_id, originator_version, topic, "
                     f"CASE WHEN octet_length(state) < %s THEN state END "
                     f"FROM {table} WHERE {where} ORDER BY notification_id LIMIT %s",
                     params, binary=True)  # fmt: skip
        notes = [Notification(id=i, originator_id=o, originator_version=v, topic=t,
                              state=b"" if state is None else state)
                 for i, o, v, t, state in curs.fetchall()]  # fmt: skip
        states: dict[int, bytes] = {}  # stubs until filled
        inline: list[int] = []  # large states stored in the events table (before payloads)
        for note in notes:
            if note.state and not is_stub(note.state):
                continue
            if not needs_state(note):
                states[note.id] = b""  # a stub no one here needs reads as empty
                continue
            kept = recent.get(note.id) if recent is not None else None
            if kept is not None:
                states[note.id] = kept
            elif note.state:
                states[note.id] = note.state
            else:
                inline.append(note.id)
        if inline:
            curs.execute(f"SELECT notification_id, state FROM {table} "
                         "WHERE notification_id = ANY(%s)", [inline], binary=True)  # fmt: skip
            states.update((id, bytes(state)) for id, state in curs.fetchall())
        recorder.payloads.fill(curs, states)
    return _with_states(notes, states)


def _events_table(recorder: Any, conn: Any) -> tuple[str, str]:
    """The events table's name and its notification id column, as ``conn`` names them."""
    if conn.dialect.name == "sqlite":
        return recorder.events_table_name, "rowid"
    return f'"{recorder.datastore.schema}"."{recorder.events_table_name}"', "notification_id"


def notification_headers(recorder: Any, conn: Any, start: int, limit: int) -> list[Notification]:
    """Notifications from ``start``, at most ``limit``, each with an empty state.

    A query asks only whether the log holds an event of its partition
    (``Processor.reading``): the topic and the originator say that, and the
    states, another partition's 8 MB tool results among them, stay unread."""
    table, column = _events_table(recorder, conn)
    statement = text(f"SELECT {column}, originator_id, originator_version, topic FROM {table} "
                     f"WHERE {column} >= :start ORDER BY {column} LIMIT :limit")  # fmt: skip
    return [
        Notification(id=int(row[0]), originator_id=row[1] if isinstance(row[1], UUID)
                     else UUID(str(row[1])), originator_version=row[2], topic=row[3], state=b"")
        for row in conn.execute(statement, {"start": start, "limit": limit})
    ]  # fmt: skip


def first_event(recorder: Any, conn: Any, originator_id: UUID) -> Any:
    """An aggregate's first stored event (None if none), read through ``conn``
    on SQLite (inside a batch: the reason above), else by the recorder."""
    if conn is None or conn.dialect.name != "sqlite":
        stored = recorder.select_events(originator_id, limit=1)
        return stored[0] if stored else None
    from eventsourcing.persistence import StoredEvent

    table = recorder.events_table_name
    row = conn.execute(
        text(f"SELECT originator_id, originator_version, topic, state FROM {table} "
             "WHERE originator_id = :id ORDER BY originator_version LIMIT 1"),
        {"id": originator_id.hex},  # as eventsourcing's SQLite recorder stores it
    ).first()  # fmt: skip
    if row is None:
        return None
    return StoredEvent(originator_id=UUID(row[0]), originator_version=row[1], topic=row[2],
                       state=bytes(row[3]))  # fmt: skip


def topic_positions(recorder: Any, conn: Any, start: int, stop: int, topic: str) -> list[int]:
    """The ids of ``topic``'s notifications from ``start`` to ``stop``, inclusive: no
    state is read (``projections.erasure_watch`` looks for rare ones often)."""
    table, column = _events_table(recorder, conn)
    statement = text(f"SELECT {column} FROM {table} WHERE {column} >= :start AND "
                     f"{column} <= :stop AND topic = :topic ORDER BY {column}")  # fmt: skip
    return [int(row[0]) for row in conn.execute(statement, {"start": start, "stop": stop,
                                                            "topic": topic})]  # fmt: skip
