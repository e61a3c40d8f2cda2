"""The suite's own PostgreSQL: a throwaway cluster where none answers, one line where none is
installed (tests/pg_provider.py; the hooks in tests/conftest.py use it)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests import pg_provider


def test_where_postgresql_is_not_installed_it_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_provider, "BIN_GLOB_ROOT", tmp_path)
    assert pg_provider.binaries() is None
    with pytest.raises(pg_provider.Unavailable, match="PostgreSQL is not installed") as refused:
        pg_provider.start_cluster()
    assert "\n" not in str(refused.value)


def test_the_newest_installed_version_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for version in ("9.6", "15", "13"):
        for tool in ("initdb", "pg_ctl"):
            (tmp_path / version / "bin").mkdir(parents=True, exist_ok=True)
            (tmp_path / version / "bin" / tool).write_text("")
    monkeypatch.setattr(pg_provider, "BIN_GLOB_ROOT", tmp_path)
    assert pg_provider.binaries() == tmp_path / "15" / "bin"


def test_nothing_answers_on_an_unused_port() -> None:
    port = pg_provider._free_port()
    assert not pg_provider.answers(f"postgresql://postgres@127.0.0.1:{port}/postgres")


@pytest.mark.postgres
@pytest.mark.skipif(pg_provider.binaries() is None, reason="PostgreSQL is not installed")
def test_a_throwaway_cluster_serves_and_is_removed_after() -> None:
    cluster = pg_provider.start_cluster()
    try:
        assert pg_provider.answers(cluster.url)
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute('CREATE DATABASE "ctxstore_throwaway"')
    finally:
        cluster.stop()
    assert not cluster.folder.exists()
    assert not pg_provider.answers(cluster.url)
