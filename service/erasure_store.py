"""The event store's side of an erasure: SQL on eventsourcing's own tables.

eventsourcing has no delete, so these statements go to its tables directly,
inside the erasure's one transaction (``service/erasure.py``), and the
files are compacted afterwards so no freed page keeps the content.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent
from sqlalchemy import Connection, bindparam, text

from domain.idempotency import ANSWERED_TOPIC, CREATED_TOPIC
from projections import tables as t
from projections.pg_payloads import Payloads, is_stub, resolve, stub_id
from service.runtime import Runtime

log = logging.getLogger("ctxstore.erasure")


def _chunks(values: list[Any], size: int = 500) -> Iterable[list[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class EventTables:
    """The event and snapshot tables of one runtime's store."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        recorder: Any = runtime.app.recorder
        snapshots: Any = runtime.app.snapshots.recorder if runtime.app.snapshots else None
        self.events: str = recorder.events_table_name
        self.snapshots: str | None = snapshots.events_table_name if snapshots else None
        self.is_sqlite = runtime.store.is_sqlite
        # SQLite's notification id is the table's rowid, PostgreSQL's a bigserial column
        self.id_column = "rowid" if self.is_sqlite else "notification_id"
        # PostgreSQL keeps large states beside the events (``projections/pg_payloads.py``)
        self.payloads: Payloads | None = getattr(recorder, "payloads", None)

    def key(self, uuid: UUID | str) -> Any:
        uuid = uuid if isinstance(uuid, UUID) else UUID(uuid)
        return uuid.hex if self.is_sqlite else uuid

    def lock(self, conn: Connection) -> int:
        """Keep every other writer out until commit; the newest notification id."""
        if self.is_sqlite:
            conn.exec_driver_sql("PRAGMA secure_delete=ON")  # freed cells are zeroed
        else:  # as the recorder does: notification ids stay in commit order
            conn.exec_driver_sql(f"LOCK TABLE {self.events} IN EXCLUSIVE MODE")
        return self.top(conn)

    def delete(self, conn: Connection, originators: list[UUID]) -> None:
        """Every event and snapshot of ``originators`` (sessions, node-id claims)."""
        ids = [self.key(u) for u in originators]
        payloads = [self.payloads.table.as_string()] if self.payloads else []
        for table in [self.events, *([self.snapshots] if self.snapshots else []), *payloads]:
            delete = text(f"DELETE FROM {table} WHERE originator_id IN :ids")
            for chunk in _chunks(ids):
                conn.execute(delete.bindparams(bindparam("ids", expanding=True)), {"ids": chunk})

    def claims_of(self, conn: Connection, claims: dict[UUID, set[str]]) -> list[UUID]:
        """Those of ``claims`` (claim id -> sessions) whose stored claim names one of them.

        Older versions claimed a bare node id store-wide; the session that holds such
        a claim may be another one than a newer session using the same id.
        """
        select = text(f"SELECT originator_id, originator_version, topic, state "
                      f"FROM {self.events} WHERE originator_id IN :ids")  # fmt: skip
        select = select.bindparams(bindparam("ids", expanding=True))
        mapper = self.runtime.app.mapper
        out: list[UUID] = []
        for chunk in _chunks([self.key(c) for c in claims]):
            for row in conn.execute(select, {"ids": chunk}):
                claim = UUID(str(row[0]))
                stored = StoredEvent(originator_id=claim, originator_version=int(row[1]),
                                     topic=row[2], state=bytes(row[3]))  # fmt: skip
                if getattr(mapper.to_domain_event(stored), "session_id", None) in claims[claim]:
                    out.append(claim)
        return out

    def key_claims(self, conn: Connection, sessions: set[str], expired: datetime) -> list[UUID]:
        """The idempotency keys' claims of ``sessions``, and those made before ``expired``.

        A claim keeps the command's answer (an erased tool description, say) and
        a hash of its request, so it goes with its session; an expired one is
        deleted on the way.  Every claim is read: erasures are rare, claims small.
        """
        select = text(f"SELECT originator_id, originator_version, topic, state "
                      f"FROM {self.events} WHERE topic = :topic")  # fmt: skip
        rows = [StoredEvent(originator_id=UUID(str(r[0])), originator_version=int(r[1]),
                            topic=r[2], state=bytes(r[3]))
                for r in conn.execute(select, {"topic": CREATED_TOPIC})]  # fmt: skip
        if self.payloads is not None:
            rows = resolve(self.payloads, conn.connection.driver_connection, rows)
        mapper = self.runtime.app.mapper
        out: list[UUID] = []
        for row in rows:
            event: Any = mapper.to_domain_event(row)
            if event.session_id in sessions or event.timestamp < expired:
                out.append(UUID(str(row.originator_id)))
        # an answer recorded just after its claim was erased (the command's answer and
        # a DELETE of its session raced) has no claim left: it goes too
        answers = text(f"SELECT originator_id FROM {self.events} WHERE topic = :topic")
        claimed = {UUID(str(r.originator_id)) for r in rows}
        out += [UUID(str(r[0])) for r in conn.execute(answers, {"topic": ANSWERED_TOPIC})
                if UUID(str(r[0])) not in claimed]  # fmt: skip
        return out

    def rewrite(self, conn: Connection, stored: StoredEvent) -> None:
        """Replace one event's state in place (a tombstoned summary keeps its place), and
        delete the payload its old state named, if it was large."""
        if self.payloads is not None:
            old = conn.execute(text(f"SELECT state FROM {self.events} WHERE originator_id = :id "
                                    "AND originator_version = :version"),
                               {"id": self.key(stored.originator_id),
                                "version": stored.originator_version}).scalar()  # fmt: skip
            if old is not None and is_stub(bytes(old)):
                table = self.payloads.table.as_string()
                conn.execute(
                    text(f"DELETE FROM {table} WHERE payload_id = :id"), {"id": stub_id(bytes(old))}
                )
        update = text(f"UPDATE {self.events} SET state = :state "
                      "WHERE originator_id = :id AND originator_version = :version")  # fmt: skip
        conn.execute(update, {"state": stored.state, "id": self.key(stored.originator_id),
                              "version": stored.originator_version})  # fmt: skip

    def insert(self, conn: Connection, stored: list[StoredEvent], top: int) -> int:
        """Append ``stored`` after notification ``top``; the new newest id.

        On SQLite the ids are given: a rowid table would otherwise reuse the
        ids of deleted rows at its end, and a process whose position is one
        of them would never see that an erasure happened.
        """
        column = "rowid, " if self.is_sqlite else ""
        value = ":rowid, " if self.is_sqlite else ""
        insert = text(f"INSERT INTO {self.events} "
                      f"({column}originator_id, originator_version, topic, state) "
                      f"VALUES ({value}:id, :version, :topic, :state)")  # fmt: skip
        for offset, event in enumerate(stored, 1):
            conn.execute(insert, {"rowid": top + offset, "id": self.key(event.originator_id),
                                  "version": event.originator_version,
                                  "topic": event.topic, "state": event.state})  # fmt: skip
        return self.top(conn)

    def top(self, conn: Connection) -> int:
        """The newest notification id."""
        found = conn.exec_driver_sql(f"SELECT max({self.id_column}) FROM {self.events}").scalar()
        return int(found or 0)

    def notifications(self, conn: Connection, sessions: list[str]) -> list[Notification]:
        """Every remaining event of ``sessions``, in log order."""
        select = text(f"SELECT {self.id_column}, originator_id, originator_version, topic, state "
                      f"FROM {self.events} WHERE originator_id IN :ids")  # fmt: skip
        select = select.bindparams(bindparam("ids", expanding=True))
        out: list[Notification] = []
        for chunk in _chunks([self.key(UUID(sid)) for sid in sessions]):
            for row in conn.execute(select, {"ids": chunk}):
                out.append(Notification(id=int(row[0]), originator_id=UUID(str(row[1])),
                                        originator_version=int(row[2]), topic=row[3],
                                        state=bytes(row[4])))  # fmt: skip
        out.sort(key=lambda n: n.id)
        if self.payloads is None:
            return out
        return resolve(self.payloads, conn.connection.driver_connection, out)

    def compact(self) -> bool:
        """Leave no freed page holding erased content; whether that fully succeeded."""
        try:
            if self.is_sqlite:
                database = self.runtime.store.engine.url.database
                assert database is not None
                with sqlite3.connect(database, timeout=30, isolation_level=None) as raw:
                    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    raw.execute("VACUUM")
                    busy: int = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                raw.close()
                return busy == 0
            names = [self.events, *([self.snapshots] if self.snapshots else []),
                     *([self.payloads.table.as_string()] if self.payloads else []),
                     *(table.name for table in t.PROJECTION_TABLES)]  # fmt: skip
            with self.runtime.store.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                conn.exec_driver_sql("SET lock_timeout = 30000")
                settled = _wait_for_older_snapshots(conn)
                conn.exec_driver_sql(f"VACUUM (FULL) {', '.join(names)}")
            return settled
        except Exception:
            log.exception("compacting the database after an erasure failed; run VACUUM yourself")
            return False


def _wait_for_older_snapshots(conn: Connection, timeout: float = 30.0) -> bool:
    """Wait until no transaction on the server can still see the deleted rows.

    ``VACUUM (FULL)`` copies a deleted row into the new table file while any
    transaction older than the delete is running, on any database of the
    server (observed: another database's ``CREATE DATABASE``), so the
    content would survive on disk.  False if one stayed past ``timeout``.
    """
    mark = conn.exec_driver_sql("SELECT xid(pg_current_xact_id())::text").scalar()
    older = text("SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                 "AND (age(backend_xmin) >= age(CAST(:mark AS xid)) "
                 "OR age(backend_xid) >= age(CAST(:mark AS xid)))")  # fmt: skip
    deadline = time.monotonic() + timeout
    while conn.execute(older, {"mark": mark}).scalar():
        if time.monotonic() > deadline:
            log.warning("a transaction older than the erasure outlived %s s", timeout)
            return False
        time.sleep(0.05)
    return True
