"""Faults during appends, with clients retrying by Idempotency-Key (issue 13).

A summarizer that fails, a database that drops connections (PostgreSQL
backends terminated; SQLite locked by another connection) and lost races
(two processes appending to one session, and the same key sent through
both): every command acknowledged or retried is stored exactly once.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

import service.runtime as runtime_module
from api.app import create_app
from domain.summarizer import OpenAICompatibleSummarizer
from tests.conftest import _pg_conninfo, immediate_policy

RETRIES = 60


def _client(rt: Any) -> TestClient:
    return TestClient(create_app(rt), raise_server_exceptions=False)


def _send(client: TestClient, path: str, body: dict[str, Any], key: str) -> httpx.Response:
    """What a careful client does: resend with the same key until it gets an answer."""
    for _ in range(RETRIES):
        answer = client.post(path, json=body, headers={"Idempotency-Key": key})
        if answer.status_code < 500:
            return answer
        time.sleep(0.1)
    raise AssertionError(f"no answer after {RETRIES} tries: {answer.status_code} {answer.text}")


def _append_all(client: TestClient, sid: str, prefix: str, count: int) -> list[str]:
    """Append ``count`` marked nodes, each sent twice (the first answer "lost")."""
    markers = []
    for i in range(count):
        marker = f"{prefix}-{i}"
        body = {"role": "user" if i % 2 == 0 else "assistant", "output": f"{marker} " + "w " * 30}
        first = _send(client, f"/sessions/{sid}/nodes", body, key=marker)
        again = _send(client, f"/sessions/{sid}/nodes", body, key=marker)
        assert first.status_code == again.status_code == 201, (first.text, again.text)
        assert first.json()["node_id"] == again.json()["node_id"]
        markers.append(marker)
    return markers


def _stored_markers(client: TestClient, sid: str) -> Counter[str]:
    for _ in range(RETRIES):
        answer = client.get(f"/sessions/{sid}/nodes")
        if answer.status_code == 200:
            break
        time.sleep(0.05)
    nodes = answer.json()["nodes"]
    return Counter(str(n["output"]).split(" ", 1)[0] for n in nodes)


@pytest.fixture
def runtime_factory(store_url: str) -> Iterator[Any]:
    opened: list[Any] = []

    def make(**kwargs: Any) -> Any:
        rt = runtime_module.Runtime(store_url, policy=immediate_policy(), **kwargs)
        opened.append(rt)
        return rt

    yield make
    for rt in opened:
        rt.close()


def test_a_failing_summarizer(runtime_factory: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    rt = runtime_factory(
        summarizer=OpenAICompatibleSummarizer(f"http://127.0.0.1:{dead}", "m", timeout=2)
    )
    with _client(rt) as client:
        sid = client.post("/sessions", json={"context_window": 256}).json()["session_id"]
        markers = _append_all(client, sid, "s", 16)
        assert _stored_markers(client, sid) == Counter(markers)


class _Dropper:
    """Breaks the app's database connections over and over, in a background thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stop = threading.Event()
        self.broken = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Dropper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)

    def _run(self) -> None:
        if self.url.startswith("sqlite"):
            self._lock_sqlite(self.url[len("sqlite:///") :])
        else:
            self._terminate_backends()

    def _terminate_backends(self) -> None:
        import psycopg

        with psycopg.connect(_pg_conninfo(self.url), autocommit=True) as conn:
            # a reconnect takes about a second: terminating more often than
            # that leaves the app no window to get anything through
            while True:
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchall()
                self.broken += len(rows)
                if self.stop.wait(1.5):
                    return

    def _lock_sqlite(self, path: str) -> None:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            while True:
                conn.execute("BEGIN EXCLUSIVE")  # every writer and reader waits meanwhile
                time.sleep(0.05)
                conn.execute("COMMIT")
                self.broken += 1
                if self.stop.wait(0.03):
                    return
        finally:
            conn.close()


def test_a_database_that_drops_connections(runtime_factory: Any, store_url: str) -> None:
    rt = runtime_factory()
    with _client(rt) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        with _Dropper(store_url) as dropper:
            markers = _append_all(client, sid, "d", 40)
        assert dropper.broken > 0
        assert _stored_markers(client, sid) == Counter(markers)


def test_lost_races_between_two_processes(runtime_factory: Any) -> None:
    first, second = runtime_factory(), runtime_factory()  # two API workers on one store
    with _client(first) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
    results: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def worker(rt: Any, prefix: str) -> None:
        try:
            with _client(rt) as client:
                results[prefix] = _append_all(client, sid, prefix, 15)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    def same_keys_elsewhere() -> None:  # the retries of worker "a" land on the other process
        try:
            with _client(second) as client:
                for i in range(15):
                    body = {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "output": f"a-{i} " + "w " * 30,
                    }
                    answer = _send(client, f"/sessions/{sid}/nodes", body, key=f"a-{i}")
                    assert answer.status_code == 201, answer.text
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=(first, "a")),
        threading.Thread(target=worker, args=(second, "b")),
        threading.Thread(target=same_keys_elsewhere),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    with _client(first) as client:
        assert _stored_markers(client, sid) == Counter(results["a"] + results["b"])
