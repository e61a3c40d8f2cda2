"""A large event's state, stored beside the events table before the event itself.

Appends keep notification ids in commit order by taking the events table's
EXCLUSIVE lock through their commit.  An 8 MB state held it 50 ms (text
that compresses well) to 190 ms (text that does not) while PostgreSQL
compressed and logged it, and every append of every session and process
waited (issue 13).  So a state of ``LARGE_STATE`` bytes or more is first
inserted into ``<events>_payloads``, which takes no table lock, and the
event row holds a stub naming it: the locked insert moves a few dozen bytes.

A reader resolves stubs (``resolve``), so every state read through the
recorder or the projection's own reads is the one appended.  Erasure deletes
a session's payloads with its events.  A payload whose event insert failed
is deleted at once; one left by a process killed in between names its
session, so erasing the session deletes it too, and ``sweep`` (run by
``ctxstore migrate``, so at every server start) deletes it once it is older
than ``ORPHAN_GRACE``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar

from eventsourcing.persistence import StoredEvent
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier, Literal

LARGE_STATE = 64 * 1024  # bytes: a state this large is stored beside the events table
# A payload is stored, then its event appended once the write's other
# payloads are stored and the append's lock taken (30 s timeout): seconds,
# minutes for the largest import.  One older than this that no event names
# was left by an append that died in between; no append will ever name it.
ORPHAN_GRACE = 3600  # seconds
STUB = b"\x00\x00ctxstore-payload:"  # no JSON, zlib or cipher text starts with two NULs


def is_stub(state: bytes) -> bool:
    return state.startswith(STUB)


def stub_id(state: bytes) -> int:
    return int(state[len(STUB) :])


class Payloads:
    """The payload table of one events table."""

    def __init__(self, schema: str, events_table: str, id_type: str) -> None:
        self.schema = schema
        self.name = f"{events_table}_payloads"
        self.id_type = id_type
        self.events = SQL("{}.{}").format(Identifier(schema), Identifier(events_table))

    @property
    def table(self) -> Composed:
        return SQL("{}.{}").format(Identifier(self.schema), Identifier(self.name))

    def create_statements(self) -> list[Composed]:
        index = Identifier(f"{self.name}_originator_idx")
        return [
            SQL("CREATE TABLE IF NOT EXISTS {table} (payload_id bigserial PRIMARY KEY, "
                "originator_id {id_type} NOT NULL, state bytea NOT NULL, "
                "stored_at timestamptz NOT NULL DEFAULT now())"
                ).format(table=self.table, id_type=SQL(self.id_type)),
            # a table made before ``sweep``: its rows count as stored now (asked first:
            # ALTER TABLE locks the table out even when it finds nothing to do)
            SQL("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
                "{literal}::regclass AND attname = 'stored_at') THEN ALTER TABLE {table} "
                "ADD COLUMN IF NOT EXISTS stored_at timestamptz NOT NULL DEFAULT now(); "
                "END IF; END $$"
                ).format(table=self.table, literal=Literal(self.table.as_string())),
            SQL("CREATE INDEX IF NOT EXISTS {index} ON {table} (originator_id)"
                ).format(index=index, table=self.table),
            SQL("CREATE TABLE IF NOT EXISTS {} (one boolean PRIMARY KEY DEFAULT true "
                "CHECK (one), through bigint NOT NULL)").format(self.swept),
            # lz4 where the server has it (as migration 0012 gives the events table)
            SQL("DO $$ BEGIN IF (SELECT attcompression FROM pg_attribute WHERE attrelid = "
                "{literal}::regclass AND attname = 'state') <> 'l' THEN "
                "ALTER TABLE {table} ALTER COLUMN state SET COMPRESSION lz4; END IF; "
                "EXCEPTION WHEN OTHERS THEN NULL; END $$"
                ).format(table=self.table, literal=Literal(self.table.as_string())),
        ]  # fmt: skip

    def store(self, conn: Any, events: Sequence[StoredEvent], stored: list[int]
              ) -> list[StoredEvent]:  # fmt: skip
        """``events`` with each large state stored here and replaced by its stub, each
        payload id added to ``stored`` as it commits (``conn`` is in autocommit mode)."""
        out: list[StoredEvent] = []
        with conn.cursor(row_factory=tuple_row) as curs:
            for event in events:
                if len(event.state) < LARGE_STATE:
                    out.append(event)
                    continue
                curs.execute(SQL("INSERT INTO {} (originator_id, state) VALUES (%s, %b) "
                                 "RETURNING payload_id").format(self.table),
                             [event.originator_id, event.state])  # fmt: skip
                row = curs.fetchone()
                assert row is not None
                stored.append(int(row[0]))
                out.append(StoredEvent(event.originator_id, event.originator_version,
                                       event.topic, STUB + str(row[0]).encode()))  # fmt: skip
        return out

    def discard(self, conn: Any, ids: list[int]) -> None:
        """Delete those of payloads ``ids`` that no event names.

        Called when an append failed, which it may have done after the server
        committed it (an interrupt while reading the answer): a payload an
        event names stays."""
        if ids:
            with conn.cursor() as curs:
                curs.execute(SQL("DELETE FROM {table} AS p WHERE p.payload_id = ANY(%s) "
                                 "AND NOT EXISTS (SELECT 1 FROM {events} AS e "
                                 "WHERE e.originator_id = p.originator_id "
                                 "AND e.state = %b || convert_to(p.payload_id::text, 'UTF8'))"
                                 ).format(table=self.table, events=self.events),
                             [ids, STUB])  # fmt: skip

    @property
    def swept(self) -> Composed:
        """One row: the payload id ``sweep`` has looked at up to."""
        return SQL("{}.{}").format(Identifier(self.schema), Identifier(f"{self.name}_swept"))

    def sweep(self, conn: Any, grace: float = ORPHAN_GRACE) -> int:
        """Delete the payloads stored more than ``grace`` seconds ago that no event
        names (their append died between the two steps); how many went.

        A younger payload may be an append's in flight, whose event is not
        committed yet: deleting it would leave that event naming nothing.  Each
        payload is looked at once (``swept`` keeps how far): every server start
        sweeps, and asking the events of every session with large nodes again
        each time would make start-up grow with the store."""
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(SQL("INSERT INTO {} (through) VALUES (0) ON CONFLICT DO NOTHING"
                             ).format(self.swept))  # fmt: skip
            curs.execute(SQL("SELECT through FROM {} FOR UPDATE").format(self.swept))
            row = curs.fetchone()
            assert row is not None
            through = int(row[0])
            curs.execute(SQL("SELECT max(payload_id) FROM {} WHERE payload_id > %s "
                             "AND stored_at < now() - make_interval(secs => %s)"
                             ).format(self.table), [through, grace])  # fmt: skip
            row = curs.fetchone()
            if row is None or row[0] is None:
                return 0
            horizon = int(row[0])
            curs.execute(SQL("DELETE FROM {table} AS p "
                             "WHERE p.payload_id > %s AND p.payload_id <= %s "
                             "AND p.stored_at < now() - make_interval(secs => %s) "
                             "AND NOT EXISTS (SELECT 1 FROM {events} AS e "
                             "WHERE e.originator_id = p.originator_id "
                             "AND e.state = %b || convert_to(p.payload_id::text, 'UTF8'))"
                             ).format(table=self.table, events=self.events),
                         [through, horizon, grace, STUB])  # fmt: skip
            deleted = int(curs.rowcount)
            curs.execute(SQL("UPDATE {} SET through = %s").format(self.swept), [horizon])
            return deleted

    def fetch(self, curs: Any, ids: list[int]) -> dict[int, bytes]:
        """The states of payloads ``ids`` (read in binary: no hex to decode)."""
        if not ids:
            return {}
        curs.execute(SQL("SELECT payload_id, state FROM {} WHERE payload_id = ANY(%s)"
                         ).format(self.table), [ids], binary=True)  # fmt: skip
        found = {int(i): bytes(state) for i, state in curs.fetchall()}
        missing = set(ids) - set(found)
        if missing:
            raise PayloadMissing(f"no payload {sorted(missing)} for a stored event's state")
        return found

    def fill(self, curs: Any, states: dict[int, bytes]) -> None:
        """Replace each stub among ``states`` (by any key) with its payload's state."""
        stubs = {key: stub_id(state) for key, state in states.items() if is_stub(state)}
        if stubs:
            found = self.fetch(curs, list(stubs.values()))
            states.update({key: found[payload] for key, payload in stubs.items()})


class PayloadMissing(LookupError):
    """A stub names a payload that is gone: an erasure deleted it after the event was
    read (read again), or the store lost it."""


Stored = TypeVar("Stored", bound=StoredEvent)  # a StoredEvent or a Notification


def resolve(payloads: Payloads, conn: Any, records: Sequence[Stored]) -> list[Stored]:
    """``records`` with each stub state replaced by its payload's state."""
    states = {i: r.state for i, r in enumerate(records) if is_stub(r.state)}
    if states:
        with conn.cursor(row_factory=tuple_row) as curs:
            payloads.fill(curs, states)
    return [dataclasses.replace(r, state=states[i]) if i in states else r
            for i, r in enumerate(records)]  # fmt: skip
