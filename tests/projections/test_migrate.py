"""``ctxstore migrate`` creates every table, and concurrent first starts are safe (issue 13)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, inspect

from domain.store_config import sqlalchemy_url
from scripts import cli

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 8


def _tables(url: str) -> set[str]:
    engine = create_engine(sqlalchemy_url(url))
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrate_creates_the_event_store_too(store_url: str) -> None:
    assert cli.main(["migrate", "--db", store_url]) == 0
    tables = _tables(store_url)
    assert {"ctx_sessions", "ctx_nodes", "ctx_commits", "alembic_version"} <= tables
    assert any(name.endswith("_events") for name in tables), tables  # the event store


def test_concurrent_first_starts_all_come_up(store_url: str) -> None:
    """``serve --workers N`` on a fresh database: every worker migrates and opens the store."""
    # each worker imports everything first, then all start at the same instant
    code = ("import sys, time; from service.runtime import Runtime; "
            "time.sleep(max(0.0, float(sys.argv[2]) - time.time())); "
            "Runtime(sys.argv[1]).close(); print('up')")  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = str(time.time() + 8)
    workers = [subprocess.Popen([sys.executable, "-c", code, store_url, start], cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
               for _ in range(WORKERS)]  # fmt: skip
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0 and out.strip() == "up", err


def test_large_values_are_compressed_with_lz4_on_postgresql(store_url: str) -> None:
    """An 8 MB event is compressed while its append holds the events table's lock."""
    if not store_url.startswith("postgresql"):
        return  # SQLite stores values as they come
    import pytest
    from sqlalchemy import text

    from projections.migrate import downgrade, upgrade

    upgrade(store_url)
    engine = create_engine(sqlalchemy_url(store_url))
    query = text("SELECT attrelid::regclass::text, attname, attcompression FROM pg_attribute "
                 "WHERE attname IN ('state', 'input', 'output') AND attrelid IN "
                 "('ctxstore_events'::regclass, 'ctx_nodes'::regclass)")  # fmt: skip
    try:
        with engine.connect() as conn:
            offered = conn.execute(text(
                "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"
            )).scalar()  # fmt: skip
            if "lz4" not in (offered or []):
                pytest.skip("this PostgreSQL has no lz4")
            assert {row[2] for row in conn.execute(query)} == {"l"}
        downgrade(store_url, "0011")
        with engine.connect() as conn:
            assert {row[2] for row in conn.execute(query)} == {""}
        upgrade(store_url)
    finally:
        engine.dispose()
