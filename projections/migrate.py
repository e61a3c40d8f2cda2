"""Create or upgrade every table of a store: the event store's and the projections'.

``ctxstore migrate`` and every API worker at start-up run this.  Several
workers starting at once on a fresh database used to race to create the
event store's tables (PostgreSQL refuses the second ``CREATE TABLE``) and
to run the same migration twice, so the whole upgrade runs under a lock
every process agrees on: a PostgreSQL advisory lock, or for SQLite an
exclusive ``flock`` on a file beside the database (``<file>-migrate.lock``;
not the database file itself, whose POSIX locks SQLite owns).  A database
busy for too long is waited out with a few retries.
"""

from __future__ import annotations

import fcntl
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from eventsourcing.persistence import OperationalError as ESOperationalError
from sqlalchemy.exc import OperationalError as SQLOperationalError

from domain.store_config import database_url, eventsourcing_env

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
SCHEMA_LOCK = 0x63747873  # "ctxs": the advisory lock id every ctxstore process agrees on
ATTEMPTS = 5
_in_process = threading.Lock()


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["url"] = url or database_url()
    return config


def upgrade(url: str | None = None, revision: str = "head") -> int:
    """Create the event store's tables, then migrate the projection tables to ``revision``;
    how many orphaned payloads ``create_event_store`` swept."""
    url = url or database_url()
    for attempt in range(ATTEMPTS):
        try:
            with _schema_lock(url):
                swept = create_event_store(url)
                command.upgrade(alembic_config(url), revision)
            return swept
        except (ESOperationalError, SQLOperationalError):
            if attempt + 1 == ATTEMPTS:
                raise
            time.sleep(random.uniform(0.05, 0.2 * 2**attempt))
    raise AssertionError("unreachable")


def downgrade(url: str | None = None, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def create_event_store(url: str) -> int:
    """The event store's tables, as eventsourcing creates them when an application opens;
    then the payloads appends that died left behind are swept (PostgreSQL keeps large
    states beside the events: ``projections/pg_payloads.py``): how many."""
    from domain.application import CtxStore

    app = CtxStore(url=url)
    try:
        payloads = getattr(app.recorder, "payloads", None)
        if payloads is None:
            return 0
        with app.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            return int(payloads.sweep(conn))
    finally:
        app.close()


@contextmanager
def _schema_lock(url: str) -> Iterator[None]:
    with _in_process:
        env = eventsourcing_env(url)
        if env["PERSISTENCE_MODULE"] == "eventsourcing.sqlite":
            with open(env["SQLITE_DBNAME"] + "-migrate.lock", "a") as lock_file:
                fcntl.flock(lock_file, fcntl.LOCK_EX)  # released when the file closes
                yield
            return
        import psycopg

        conninfo = {"dbname": env["POSTGRES_DBNAME"], "host": env["POSTGRES_HOST"],
                    "port": env["POSTGRES_PORT"], "user": env["POSTGRES_USER"],
                    "password": env["POSTGRES_PASSWORD"] or None}  # fmt: skip
        with psycopg.connect(**conninfo, autocommit=True) as conn:  # type: ignore[arg-type]
            conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
