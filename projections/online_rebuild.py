"""Rebuild the projections beside the live ones, check them, then switch in one transaction.

The offline rebuild (``projections.rebuild``) empties the live tables and
refills them, so servers must stop first.  This one never touches the live
tables until the end:

1. It projects the whole log into a **shadow** copy of the projection tables
   (a ``ctxstore_rebuild`` schema on PostgreSQL, an attached
   ``<file>.rebuild`` database on SQLite) while servers keep serving and
   appending.  The rules history is copied over first, so the shadow applies
   the same rules at the same positions.
2. **Digest check**: in a read snapshot of the live tables at their
   tracking position ``L``, the shadow is caught up to exactly ``L`` and both
   are digested; they must be equal (``expect_identical``) before anything
   is switched.  Nothing holds a lock meanwhile.
3. **Switch**: one transaction takes the live tracking lock (the projection
   stops advancing; commands still store events), catches the shadow up to
   the live position, and replaces every live projection row by the
   shadow's.  Readers see the old rows until it commits, then the new ones;
   a live process's position is unchanged, so it just goes on.

A projection-format migration can use the same path with
``expect_identical=False``: the check is then skipped, and processes holding
the old format in memory must restart after the switch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, select, text
from sqlalchemy.engine import make_url

from domain.application import CtxStore
from domain.erasure import ERASURE_TOPIC
from domain.policy import Policy
from domain.store_config import sqlalchemy_url
from domain.tokens import check_tokenizer
from projections import partitions as parts
from projections import recall_index, tracking
from projections import tables as t
from projections.notification_reads import select_notifications
from projections.parallel_catch_up import catch_up_in_parallel
from projections.processor import Processor
from projections.rebuild import Progress, digest, digest_on
from projections.store import ProjectionStore, make_engine
from projections.tracking import APPLICATION

SHADOW = "ctxstore_rebuild"
SHADOW_TABLES = (t.rules, *t.PROJECTION_TABLES)


@dataclass
class OnlineRebuild:
    """What an online rebuild did: the check and the switch."""

    identical: bool
    switched: bool
    events: int
    checked_at: int  # the live position the digests were compared at
    switched_at: int | None  # the live position the switch replaced the rows at
    seconds: float
    before: dict[str, str] = field(default_factory=dict)  # live, at ``checked_at``
    after: dict[str, str] = field(default_factory=dict)  # shadow, at ``checked_at``


def online_rebuild(url: str, progress: Progress | None = None, expect_identical: bool = True,
                   processes: int = 1) -> OnlineRebuild:  # fmt: skip
    """Rebuild into the shadow, compare at the live position, switch if they agree.

    ``processes`` > 1 projects the shadow's partitions in that many processes
    (``projections.parallel_catch_up``; PostgreSQL with P > 1 only)."""
    check_tokenizer()
    started = time.perf_counter()
    app = CtxStore(url=url)
    live = ProjectionStore(url)
    try:
        with _shadow(url, live) as shadow:
            _copy_rules(live, shadow)
            history = live.policy_history()
            policy = history[-1][1] if history else Policy()
            # the shadow splits sessions as the live rows do, so that partition by
            # partition both stop at the same position
            processor = Processor(
                app,
                shadow,
                policy,
                partitions=live.ensure_tracking(parts.configured(postgres=not live.is_sqlite)),
            )
            total = app.recorder.max_notification_id() or 0
            on_page = (lambda done: progress(done, total)) if progress is not None else None
            # the long part, nothing locked; never past the live projection, so the
            # check below compares both at one position
            if processes > 1:
                events = catch_up_in_parallel(processor, processes, stop=live.positions())
            else:
                events = processor.catch_up(on_page=on_page, stop=live.positions())
            with live.engine.connect() as snapshot, _read_snapshot(snapshot):
                positions = _live_positions(snapshot)
                checked_at = max(positions.values(), default=0)
                events += processor.catch_up(stop=positions)
                before = digest_on(snapshot)
            after = digest(shadow)
            identical = before == after
            switched_at = None
            if identical or not expect_identical:
                switched_at = _switch(live, shadow, processor, since=total)
        return OnlineRebuild(identical=identical, switched=switched_at is not None,
                             events=events, checked_at=checked_at, switched_at=switched_at,
                             seconds=round(time.perf_counter() - started, 3),
                             before=before, after=after)  # fmt: skip
    finally:
        live.close()
        app.close()


@contextmanager
def _shadow(url: str, live: ProjectionStore) -> Iterator[ProjectionStore]:
    """A fresh, empty shadow copy of the projection tables; dropped afterwards."""
    if live.is_sqlite:
        path = f"{make_url(sqlalchemy_url(url)).database}.rebuild"
        _remove(path)
        engine = _sqlite_shadow_engine(url, path)
    else:
        engine = make_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {SHADOW} CASCADE")
            conn.exec_driver_sql(f"CREATE SCHEMA {SHADOW}")
    shadow = ProjectionStore(url, engine=engine, schema=SHADOW)
    try:
        t.metadata.create_all(shadow.engine, tables=list(SHADOW_TABLES))
        if live.is_sqlite:  # the index is no table of the metadata (revision 0014)
            with shadow.engine.begin() as conn:
                conn.exec_driver_sql(recall_index.SQLITE_FTS.format(schema=f"{SHADOW}."))
        yield shadow
    finally:
        if live.is_sqlite:
            shadow.close()
            _remove(path)
        else:
            with engine.begin() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {SHADOW} CASCADE")
            shadow.close()


def _sqlite_shadow_engine(url: str, path: str) -> Engine:
    """Connections to the live file with the shadow attached as ``SHADOW``.

    Transactions begin deferred: a write then locks only the database it
    writes (the shadow), and reading the live tables or the event log takes
    a WAL snapshot, so live writers never wait for the rebuild.
    """
    options = {"timeout": 30, "check_same_thread": False}
    engine = create_engine(sqlalchemy_url(url), connect_args=options)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("ATTACH DATABASE ? AS " + SHADOW, (path,))
        dbapi_conn.execute(f"PRAGMA {SHADOW}.synchronous=OFF")  # scratch: rebuilt if lost

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def _remove(path: str) -> None:
    for name in (path, f"{path}-journal"):
        if os.path.exists(name):
            os.remove(name)


def _copy_rules(live: ProjectionStore, shadow: ProjectionStore) -> None:
    with live.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(t.rules))]
    with shadow.engine.begin() as conn:
        if rows:
            conn.execute(t.rules.insert(), rows)


@contextmanager
def _read_snapshot(conn: Connection) -> Iterator[None]:
    """One consistent view of the live tables for as long as the block runs."""
    if conn.dialect.name == "sqlite":
        with conn.begin():  # a WAL read transaction: a snapshot from its first read
            yield
        return
    conn.execution_options(isolation_level="REPEATABLE READ")
    with conn.begin():
        yield


def _live_positions(conn: Connection) -> dict[int, int]:
    """Each live partition's position, in the snapshot ``conn`` reads."""
    return tracking.positions(conn)


class SwitchRefused(Exception):
    """Something changed during the rebuild that the shadow cannot show: nothing was
    switched, and running the rebuild again takes it into account."""

    code = "switch_refused"


class ErasedDuringRebuild(SwitchRefused):
    """A session was erased after the shadow had projected it: nothing was switched."""

    code = "erased_during_rebuild"


class RulesChangedDuringRebuild(SwitchRefused):
    """New rules were recorded after the shadow copied the rules history: the shadow
    projected events under older rules than the live projection did.  Nothing was
    switched."""

    code = "rules_changed_during_rebuild"


def _switch(live: ProjectionStore, shadow: ProjectionStore, processor: Processor,
            since: int) -> int:  # fmt: skip
    """Replace the live projection rows by the shadow's, in one transaction; the position.

    An erasure stored after notification ``since`` (when the shadow began) may
    have removed events the shadow already projected: the shadow would bring
    erased content back, so the switch is refused and the rebuild must run again.
    """
    engine = shadow.engine if live.is_sqlite else live.engine  # SQLite: the one that attaches
    with engine.connect() as conn:
        with conn.begin():
            positions = _lock_live(conn, live.is_sqlite)
            position = max(positions.values(), default=0)
            if select_notifications(processor.app.recorder, conn, since + 1, 1, stop=position,
                                    topics=[ERASURE_TOPIC]):  # fmt: skip
                raise ErasedDuringRebuild("a session was erased during the rebuild; run it again")
            processor.catch_up(stop=positions)  # what the projection did since the check
            # recording rules takes the tracking lock this transaction holds: what it reads
            # stays the live history until the switch commits (read after the catch-up: on
            # SQLite a read here would keep the shadow's writer from committing)
            if _rules(conn, _live(live.is_sqlite)) != _rules(conn, f"{SHADOW}."):
                raise RulesChangedDuringRebuild("new rules were recorded during the rebuild; "
                                                "run it again")  # fmt: skip
            _replace(conn, live.is_sqlite)
    return position


def _live(is_sqlite: bool) -> str:
    """How the switch names the live tables: beside the attached shadow, SQLite's are
    ``main``'s; PostgreSQL's are on the search path."""
    return "main." if is_sqlite else ""


def _rules(conn: Connection, schema: str) -> list[tuple[Any, ...]]:
    query = f"SELECT from_position, rules_version, policy FROM {schema}ctx_rules ORDER BY 1"
    return [tuple(row) for row in conn.exec_driver_sql(query)]


def _lock_live(conn: Connection, is_sqlite: bool) -> dict[int, int]:
    """Hold every live tracking row until commit: the live projection waits; each
    partition's position."""
    where = "WHERE application_name = :name"
    if is_sqlite:  # a write to the live file takes its write lock (and only that one)
        conn.execute(text("UPDATE main.ctx_tracking SET notification_id = notification_id "
                          + where), {"name": APPLICATION})  # fmt: skip
        rows = conn.execute(text("SELECT partition, notification_id FROM main.ctx_tracking "
                                 + where), {"name": APPLICATION})  # fmt: skip
    else:  # in partition order, as every process locks several
        query = f"SELECT partition, notification_id FROM ctx_tracking {where} ORDER BY partition"
        rows = conn.execute(text(query + " FOR UPDATE"), {"name": APPLICATION})
    return {int(p): int(n) for p, n in rows}


def _replace(conn: Connection, is_sqlite: bool) -> None:
    """Every live projection row, replaced by the shadow's (readers see either, never half);
    on SQLite, the live recall index made the shadow's (``recall_index.switch``)."""
    live_schema = _live(is_sqlite)
    changes = recall_index.switch(conn, "main", SHADOW) if is_sqlite else None
    for table in reversed(t.PROJECTION_TABLES):
        conn.exec_driver_sql(f"DELETE FROM {live_schema}{table.name}")
    for table in t.PROJECTION_TABLES:
        columns = ", ".join(f'"{c.name}"' for c in table.columns)
        conn.exec_driver_sql(f"INSERT INTO {live_schema}{table.name} ({columns}) "
                             f"SELECT {columns} FROM {SHADOW}.{table.name}")  # fmt: skip
    if changes is not None:
        recall_index.switched(conn, "main", changes)
