"""``GET /ready``: 503 until migrations ran and the projection is within the allowed lag."""

from __future__ import annotations

import threading
from typing import Any

from starlette.testclient import TestClient

from api.app import create_app
from api.routes_ops import Operations
from domain import commands
from projections.backlog import backlog
from projections.migrate import downgrade, upgrade
from service import runtime_queries
from tests.api.conftest import LOCAL


def test_ready_turns_200_only_after_catch_up(runtime: Any) -> None:
    app = create_app(runtime, ops=Operations(ready_max_lag=2))
    with TestClient(app, base_url=LOCAL) as client:
        assert client.get("/ready").status_code == 200
        # Events stored, not projected: another process wrote them, nobody caught up.
        sid, _ = commands.handle(runtime.app, commands.StartSession(title="t"))
        for i in range(3):
            commands.handle(runtime.app, commands.AppendNode(
                session_id=sid, node={"role": "user", "output": f"n{i}"}))  # fmt: skip
        r = client.get("/ready")
        assert r.status_code == 503
        body = r.json()
        assert body["status"] == "not_ready" and body["ready"] is False
        assert max(body["lag"].values()) > 2 and "behind" in body["reason"]  # counted to 3
        assert client.get("/health").status_code == 200  # liveness is another question
        runtime.catch_up()
        r = client.get("/ready")
        assert r.status_code == 200, r.text
        assert r.json() == {"status": "ready", "ready": True, "reason": None,
                            "lag": {p: 0 for p in body["lag"]}}  # fmt: skip


def test_ready_is_503_until_migrations_ran(runtime: Any) -> None:
    with TestClient(create_app(runtime), base_url=LOCAL) as client:
        assert client.get("/ready").status_code == 200
        downgrade(runtime.url, "-1")
        try:
            r = client.get("/ready")
            assert r.status_code == 503 and "migrations" in r.json()["reason"]
        finally:
            upgrade(runtime.url)
        assert client.get("/ready").status_code == 200


def test_a_server_whose_warm_up_fails_still_starts(runtime: Any, monkeypatch: Any) -> None:
    """Warming the read path at start (``Runtime.warm_reads``) is only a head start: a
    store it cannot read yet must not keep ``/health`` (or an erasure) unreachable."""
    from projections import queries

    def broken(store: Any) -> None:
        raise RuntimeError("the store is not readable yet")

    monkeypatch.setattr(queries, "warm_reads", broken)
    with TestClient(create_app(runtime), base_url=LOCAL) as client:
        assert client.get("/health").status_code == 200


def _unprojected(runtime: Any, events: int) -> None:
    """Events stored, not projected: another process wrote them, nobody caught up."""
    sid, _ = commands.handle(runtime.app, commands.StartSession(title="t"))
    for i in range(events - 1):
        commands.handle(runtime.app, commands.AppendNode(
            session_id=sid, node={"role": "user", "output": f"n{i}"}))  # fmt: skip


def test_a_server_catches_up_as_it_starts_when_little_waits(runtime: Any) -> None:
    """A short backlog is projected as the server starts (``Runtime.warm_projection``,
    beside its first requests), so its first read does not also build the projector
    (issue 29)."""
    _unprojected(runtime, 4)
    assert max(backlog(runtime.processor).values()) == 4
    app = create_app(runtime)
    with TestClient(app, base_url=LOCAL):
        app.state.warming.join()
        assert max(backlog(runtime.processor).values()) == 0


def test_a_long_backlog_is_left_to_the_reads(runtime: Any, monkeypatch: Any) -> None:
    """A replay (after a revision that empties the projections) is not started by a
    server's start: past ``WARM_BACKLOG`` events, start-up projects nothing."""
    monkeypatch.setattr(runtime_queries, "WARM_BACKLOG", 3)
    _unprojected(runtime, 4)
    app = create_app(runtime)
    with TestClient(app, base_url=LOCAL) as client:
        app.state.warming.join()
        assert max(backlog(runtime.processor).values()) == 4
        assert client.get("/health").status_code == 200
        assert client.get("/sessions").status_code == 200  # a read still catches up
        assert max(backlog(runtime.processor).values()) == 0


def test_a_failed_catch_up_at_start_leaves_the_server_up(runtime: Any, monkeypatch: Any) -> None:
    """Like warming the reads, the start-up catch-up is only a head start."""

    def broken(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("the tracking rows are locked")

    _unprojected(runtime, 2)
    monkeypatch.setattr(runtime, "catch_up", broken)
    app = create_app(runtime)
    with TestClient(app, base_url=LOCAL) as client:
        app.state.warming.join()
        assert client.get("/health").status_code == 200


def test_a_slow_catch_up_at_start_does_not_hold_health(runtime: Any, monkeypatch: Any) -> None:
    """Past ``WARM_UP_HEAD_START`` (a large store, another process's erasure holding the
    locks) the start-up catch-up goes on beside the requests: ``/health`` answers while
    it still waits."""
    import api.app as app_module

    release, held_up = threading.Event(), []
    monkeypatch.setattr(app_module, "WARM_UP_HEAD_START", 0.05)
    monkeypatch.setattr(runtime, "warm_projection",
                        lambda: held_up.append(not release.wait(30)))  # fmt: skip
    app = create_app(runtime)
    with TestClient(app, base_url=LOCAL) as client:
        assert client.get("/health").status_code == 200
        release.set()  # only now: health answered while the catch-up was held up
        app.state.warming.join()
    assert held_up == [False], "the catch-up waited for the test, not for its timeout"
