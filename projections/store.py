"""Thin SQL writer and loader for the projection tables.

One transaction per batch writes the rows a batch produced together with
the tracking position, so a crash either keeps the whole batch (and its
position) or none of it: no event is lost or applied twice.  Concurrent
processors are serialised on their partition's tracking row (``FOR UPDATE``
on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite; ``projections.tracking``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from eventsourcing.persistence import InterfaceError as ESInterfaceError
from eventsourcing.persistence import OperationalError as ESOperationalError
from sqlalchemy import (
    Connection,
    Engine,
    Table,
    and_,
    bindparam,
    create_engine,
    event,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError as SQLOperationalError

from domain.policy import Policy
from domain.store_config import sqlalchemy_url
from projections import recall_index, tracking
from projections import tables as t
from projections.packed_text import stored
from projections.records import Outbox

# The columns ``projections.packed_text.pack`` may compress, by table.
PACKED = {t.nodes.name: ("input", "output"), t.commits.name: ("items",)}
WRITE_OPTION = "ctxstore_writes"  # execution option: this transaction will write
# What a locked, busy or unreachable database raises, from the event store
# (eventsourcing) or the projection tables (SQLAlchemy): retryable, not a bug.
DATABASE_ERRORS = (ESInterfaceError, ESOperationalError, SQLOperationalError)


def database_error_line(exc: BaseException) -> str:
    """The first line of a database error (drivers append SQL and hints below it)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def make_engine(url: str) -> Engine:
    sa_url = sqlalchemy_url(url)
    if sa_url.startswith("sqlite"):
        engine = create_engine(sa_url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _: Any) -> None:
            dbapi_conn.isolation_level = None  # let us issue BEGIN IMMEDIATE ourselves
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute("PRAGMA synchronous=NORMAL")

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # Writers take the write lock up front (so two never deadlock upgrading
            # a read lock); readers take a WAL snapshot and never wait for a writer.
            writes = conn.get_execution_options().get(WRITE_OPTION, False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")

        return engine
    # A lock wait as long as SQLite's busy timeout, then an error: a stuck
    # processor holding the tracking row must not hang every caller forever.
    return create_engine(sa_url, pool_size=5, max_overflow=5, pool_pre_ping=True,
                         connect_args={"options": "-c lock_timeout=30000"})  # fmt: skip


# Built once: building ``update(...).values(**row)`` for each changed session cost more
# than running it (issue 29); the SET columns come from the parameters' own keys.
_UPDATE_SESSION = update(t.sessions).where(t.sessions.c.session_id == bindparam("by_id"))


def _by_id(row: dict[str, Any]) -> dict[str, Any]:
    """A session row as ``_UPDATE_SESSION``'s parameters: its id names the row to update."""
    row["by_id"] = row.pop("session_id")
    return row


_RULES = select(t.rules.c.from_position, t.rules.c.policy).order_by(t.rules.c.from_position)


class ProjectionStore:
    def __init__(self, url: str, engine: Engine | None = None, schema: str | None = None) -> None:
        """``schema``: the tables of that schema (an attached database on SQLite) stand
        for the projection's own, as an online rebuild's shadow copy does."""
        self.url = url
        self.schema = schema
        self.engine = engine or make_engine(url)
        if schema is not None:
            self.engine = self.engine.execution_options(schema_translate_map={None: schema})
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        # Reads that are one statement each, outside any batch: on PostgreSQL in
        # autocommit, so each sends only the statement, not BEGIN and ROLLBACK around
        # it (a render's two reads took eight round trips with the pool's ping, now
        # four; issue 29).  Under READ COMMITTED a statement has a snapshot of its own
        # either way.  SQLite's BEGIN costs no trip.
        self.reads = (
            self.engine
            if self.is_sqlite
            else self.engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        self._inserts: dict[str, tuple[str, itemgetter[Any]]] = {}
        # the rules history as last read: its records, and the policies they parse to
        self._rules_read: tuple[tuple[tuple[int, str], ...], list[tuple[int, Policy]]] = ((), [])

    def close(self) -> None:
        self.engine.dispose()

    def ensure_tracking(self, partitions: int) -> int:
        """Create the tracking rows if none exist; the partition count stored in them."""
        with self.writing() as conn:
            return tracking.ensure(conn, self._insert_dialect(t.tracking), partitions)

    @contextmanager
    def batch(self, partition: int = 0, partitions: int = 1) -> Iterator[tuple[Connection, int]]:
        """A write transaction holding ``partition``'s tracking lock; yields its position.

        Tracking rows emptied since (a rebuild, an erasure) are created again,
        with ``partitions``: the count the caller's sessions were split by."""
        with self.writing() as conn:
            position = tracking.lock(conn, partition, partitions)
            if position is None:
                tracking.ensure(conn, self._insert_dialect(t.tracking), partitions)
                position = tracking.lock(conn, partition, partitions)
                assert position is not None
            yield conn, position

    @contextmanager
    def batch_all(self, partitions: int | None = None) -> Iterator[tuple[Connection, int]]:
        """A write transaction holding every partition's lock; yields the furthest position.

        Tracking rows emptied since are created again with ``partitions`` (one
        if not given), as ``batch`` does; rows split another way than a given
        ``partitions`` refuse (``PartitionCountChanged``)."""
        with self.writing() as conn:
            stored = tracking.stored_partitions(conn)
            if stored is None:
                tracking.ensure(conn, self._insert_dialect(t.tracking), partitions or 1)
            elif partitions is not None and stored != partitions:
                raise tracking.PartitionCountChanged(stored, partitions)
            yield conn, max(tracking.lock_all(conn).values())

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """A write transaction (on SQLite it takes the write lock up front)."""
        with self.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                yield conn

    def _insert_dialect(self, table: Table) -> Any:
        """The dialect's own INSERT, which knows ON CONFLICT DO NOTHING."""
        if self.is_sqlite:
            return sqlite_insert(table)
        return pg_insert(table)

    def position(self) -> int:
        """The furthest partition's position (0 before anything was projected)."""
        return max(self.positions().values(), default=0)

    def positions(self) -> dict[int, int]:
        """Every partition's committed position."""
        with self.engine.connect() as conn:
            return tracking.positions(conn)

    def sessions_changed_after(self, position: int | dict[int, int]) -> list[str]:
        """The sessions whose last event the projections applied is after ``position``:
        what a change at the tracking position touched, in one small query.

        ``position`` may be per partition (``{partition: position}``): then only
        those partitions' sessions changed after their own position."""
        c = t.sessions.c
        if isinstance(position, dict):
            where = or_(*(and_(c.partition == p, c.notification_id > at)
                          for p, at in position.items()))  # fmt: skip
        else:
            where = c.notification_id > position
        with self.engine.connect() as conn:
            rows = conn.execute(select(c.session_id).where(where))
            return [str(row[0]) for row in rows]

    def write(self, conn: Connection, outbox: Outbox, position: int,
              partition: int | Callable[[str], int] = 0) -> None:  # fmt: skip
        """The batch's rows, and ``partition``'s tracking row moved to ``position``.

        ``partition`` may instead be each session's partition by its id (an
        erasure re-projecting sessions of every partition): then every
        tracking row moves to ``position``."""
        self._insert(conn, t.nodes, outbox.nodes)
        recall_index.write(conn, self.schema, outbox.recall)  # with its full-text index
        of = partition if callable(partition) else (lambda _sid, p=partition: p)
        started = [dict(s.to_row(), partition=of(sid)) for sid, s in outbox.new_sessions.items()]
        self._insert(conn, t.sessions, started)
        changed = [_by_id(s.to_row()) for s in outbox.changed_sessions.values()]
        if changed:
            conn.execute(_UPDATE_SESSION, changed)
        self._insert(conn, t.commits, outbox.commits)
        self._insert(conn, t.transitions, outbox.transitions)
        self._insert(conn, t.usage, outbox.usage)
        for key, tools in outbox.tool_sets.items():  # content-addressed: equal sets share a row
            insert_set = self._insert_dialect(t.tool_sets).values(tools_key=key, tools=tools)
            conn.execute(insert_set.on_conflict_do_nothing())
        if callable(partition):
            tracking.advance_all(conn, position)
        else:
            tracking.advance(conn, partition, position)

    def _insert(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
        """Bulk insert through the driver: ``executemany`` on SQLite, ``COPY`` on PostgreSQL.

        A rebuild writes three rows per event, already plain values for
        exactly the table's columns.  SQLAlchemy's per-row parameter handling
        cost more than the insert itself, and on PostgreSQL even pipelined
        ``executemany`` spent a third of a rebuild binding and sending
        statements one by one, where ``COPY`` streams the rows in one go.
        Both run inside the batch's transaction.
        """
        if not rows:
            return
        statement = self._inserts.get(table.name)
        if statement is None:
            quote = conn.dialect.identifier_preparer.quote
            names = [c.name for c in table.columns]
            columns = ", ".join(quote(n) for n in names)
            name = quote(table.name) if self.schema is None else (
                f"{quote(self.schema)}.{quote(table.name)}")  # fmt: skip
            if self.is_sqlite:
                sql = (f"INSERT INTO {name} ({columns}) "
                       f"VALUES ({', '.join('?' for _ in names)})")  # fmt: skip
            else:
                sql = f"COPY {name} ({columns}) FROM STDIN"
            statement = self._inserts[table.name] = (sql, itemgetter(*names))
        sql, values = statement
        if self.is_sqlite:
            if table.name in PACKED:  # a packed text as its bytes (projections.packed_text)
                rows = [{**row, **{n: stored(row[n]) for n in PACKED[table.name]}}
                        for row in rows]  # fmt: skip
            conn.exec_driver_sql(sql, [values(row) for row in rows])
            return
        driver = conn.connection.driver_connection
        assert driver is not None
        with driver.cursor() as cursor, cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(values(row))

    def commit_rows(
        self, checkpoint_id: str, conn: Connection | None = None
    ) -> list[dict[str, Any]]:
        query = select(
            t.commits.c.commit_id, t.commits.c.parent_ids, t.commits.c.is_checkpoint,
            t.commits.c["items"], t.commits.c.checkpoint_id,
        ).where(t.commits.c.checkpoint_id == checkpoint_id)  # fmt: skip
        if conn is not None:
            return [dict(r._mapping) for r in conn.execute(query)]
        with self.reads.connect() as own:
            return [dict(r._mapping) for r in own.execute(query)]

    # ----------------------------------------------------------- rules history

    def policy_history(self, conn: Connection | None = None) -> list[tuple[int, Policy]]:
        """The rules history; inside a batch, pass its connection (it holds the lock)."""
        if conn is not None:
            rows = conn.execute(_RULES).all()
        else:
            with self.engine.connect() as own:
                rows = own.execute(_RULES).all()
        recorded = tuple((int(r.from_position), str(r.policy)) for r in rows)
        read = self._rules_read  # once: another thread may replace it meanwhile
        if recorded != read[0]:  # parsing every record again cost every batch
            read = (recorded, [(at, Policy.from_record(p)) for at, p in recorded])
            self._rules_read = read
        return list(read[1])

    def record_policy(self, policy: Policy, log_position: int = 0,
                      partitions: int | None = None) -> list[tuple[int, Policy]]:  # fmt: skip
        """Make ``policy`` the rules from the next event stored on (history is kept).

        ``log_position`` is the newest notification in the event store.  The
        tracking position alone can be behind it (events stored but not yet
        projected, or tracking reset by a migration); starting there would
        apply the new rules to events already under the old ones, and could
        even replace the history's first entry.
        """
        history = self.policy_history()
        if history and history[-1][1].rules_version == policy.rules_version:
            return history
        with self.batch_all(partitions) as (conn, position):
            start = max(position, log_position) + 1
            conn.execute(t.rules.delete().where(t.rules.c.from_position == start))
            conn.execute(insert(t.rules).values(from_position=start,
                                                rules_version=policy.rules_version,
                                                policy=policy.to_json()))  # fmt: skip
        return self.policy_history()

    # ------------------------------------------------------------- sync reads

    def rows_after(self, table: Any, position: int, conn: Connection) -> list[Any]:
        query = select(table).where(table.c.notification_id > position)
        return list(conn.execute(query.order_by(table.c.notification_id)))

    def truncate(self, partitions: int | None = None) -> None:
        """Empty every projection table in one transaction (the rules history stays).

        ``partitions``: make the tracking rows again, split that way, in the
        same transaction.  Left to the next batch, a process still running
        with the old count could make them first, with its own count, and the
        rebuild would quietly keep that split (or the two would mix)."""
        with self.writing() as conn:
            if self.is_sqlite:  # a bare DELETE is SQLite's own truncate
                recall_index.clear(conn)
                for table in reversed(t.PROJECTION_TABLES):
                    conn.execute(table.delete())
            else:
                names = ", ".join(table.name for table in t.PROJECTION_TABLES)
                conn.exec_driver_sql(f"TRUNCATE {names}")
            if partitions is not None:
                tracking.ensure(conn, self._insert_dialect(t.tracking), partitions)


def loads(text: str | None) -> Any:
    return json.loads(text) if text else None
