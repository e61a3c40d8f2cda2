"""Shared fixtures: every store-backed test runs on SQLite and on PostgreSQL.

PostgreSQL tests create a fresh database per test and drop it afterwards,
over a real connection (never a mock).  ``CTXSTORE_TEST_STORES`` narrows the
stores (``sqlite``, ``postgres`` or both, comma-separated; default both).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import pg_provider, tiers

ROOT = Path(__file__).resolve().parent.parent
_shared = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared)
# Absolute, so tests that run a script from another folder still find it.
if os.environ.get("TIKTOKEN_CACHE_DIR"):
    os.environ["TIKTOKEN_CACHE_DIR"] = os.path.abspath(os.environ["TIKTOKEN_CACHE_DIR"])

# Rules that act as soon as something is due: most tests check what a rule does
# to an item, not when a batch of them runs (tests/domain/test_batching.py).
IMMEDIATE_POLICY_JSON = '{"batch_trigger": 0.0, "clear_at_least": 0}'


def immediate_policy(**overrides: Any) -> Any:
    """Today's rules, acting as soon as something is due, with ``overrides``."""
    import json

    from domain.policy import Policy

    return Policy.from_json(json.dumps({**json.loads(IMMEDIATE_POLICY_JSON), **overrides}))


# What the tests started with; ``pg_admin_url()`` is the one in force (a throwaway cluster the
# suite starts replaces it once the tests are collected: tests/pg_provider.py).
PG_ADMIN_URL = pg_provider.admin_url()
STORES = [
    s.strip()
    for s in os.environ.get("CTXSTORE_TEST_STORES", "sqlite,postgres").split(",")
    if s.strip()
]


def incompressible(size: int, seed: int = 0) -> str:
    """``size`` characters zlib cannot shrink below three quarters: a state made of them
    stays large once stored compressed (``domain.state_compressor``)."""
    import base64
    import random

    return base64.b64encode(random.Random(seed).randbytes(size * 3 // 4 + 3)).decode()[:size]


def pg_admin_url() -> str:
    """The admin URL tests create and drop their PostgreSQL databases over."""
    return pg_provider.admin_url()


def _pg_conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def create_pg_database() -> str:
    import psycopg

    name = f"ctxstore_test_{uuid.uuid4().hex[:12]}"
    admin = pg_admin_url()
    with psycopg.connect(_pg_conninfo(admin), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin.rsplit("/", 1)[0] + "/" + name


def drop_pg_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(_pg_conninfo(pg_admin_url()), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def empty_store(kind: str, folder: Path, name: str = "ctxstore") -> Iterator[str]:
    """A URL for an empty store of ``kind`` (sqlite or postgres), dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / f'{name}.db'}"
        return
    url = create_pg_database()
    try:
        yield url
    finally:
        drop_pg_database(url)


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL for an empty store of each kind."""
    with empty_store(request.param, tmp_path) as url:
        yield url


@contextmanager
def opened_app(url: str) -> Iterator[Any]:
    """A ``CtxStore`` on ``url``, closed afterwards (one per simulated process)."""
    from domain.application import CtxStore

    application = CtxStore(url=url)
    try:
        yield application
    finally:
        application.close()


@pytest.fixture
def app(store_url: str) -> Iterator[object]:
    with opened_app(store_url) as application:
        yield application


# -- tiers and PostgreSQL ------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "quick: the edit-and-test tier (tests/tiers.py)")
    config.addinivalue_line("markers", "postgres: needs PostgreSQL without a store_url param")
    postgres = _PostgresForTheRun()
    config.pluginmanager.register(postgres, "ctxstore-postgres")
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        postgres.start_for_the_workers()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the quick tier before ``-m`` selects from it."""
    for item in tiers.quick_items(items):
        item.add_marker(pytest.mark.quick)


class _PostgresForTheRun:
    """Once the tests to run are chosen: PostgreSQL for those that need it (pg_provider)."""

    cluster: pg_provider.Cluster | None = None

    def start_for_the_workers(self) -> None:
        """Under pytest-xdist (``-n``), before the workers start: one throwaway cluster for
        all of them, whose address they inherit, rather than one each (and workers that
        could disagree on which tests they collected). Where none can start, each worker
        finds the same and decides alike."""
        if "postgres" not in STORES or pg_provider.answers(pg_admin_url()):
            return
        try:
            self.cluster = pg_provider.start_cluster()
        except pg_provider.Unavailable:
            return
        os.environ["CTXSTORE_TEST_PG_URL"] = self.cluster.url

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if "postgres" not in STORES:  # CTXSTORE_TEST_STORES=sqlite: those tests skip themselves
            return
        needing = [item for item in items if tiers.uses_postgres(item)]
        if not needing or pg_provider.answers(pg_admin_url()):
            return
        say = config.pluginmanager.get_plugin("terminalreporter")
        try:
            self.cluster = pg_provider.start_cluster()
        except pg_provider.Unavailable as why:
            if pg_provider.required():
                raise pytest.UsageError(
                    f"PostgreSQL is required (CTXSTORE_REQUIRE_POSTGRES=1): {why}"
                ) from None
            if say is not None:
                say.write_line(f"{why}: running SQLite alone ({len(needing)} tests left out)")
            config.hook.pytest_deselected(items=needing)
            items[:] = [item for item in items if not tiers.uses_postgres(item)]
            return
        os.environ["CTXSTORE_TEST_PG_URL"] = self.cluster.url
        if say is not None:
            say.write_line(
                f"nothing answered at {PG_ADMIN_URL}: "
                f"a throwaway PostgreSQL cluster at {self.cluster.url} (removed after the run)"
            )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
