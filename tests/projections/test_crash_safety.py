"""A catch-up that dies midway leaves the projection exactly as it was.

The failure is injected into our own code (``Projector.apply`` raising on
the N-th event, or ``ProjectionStore.write`` raising after its inserts);
the databases are real.  The next catch-up must apply every event exactly
once: its tables are compared with a clean rebuild by digest.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from projections import tables as t
from projections.projector import Projector
from projections.rebuild import digest, rebuild_and_compare
from projections.store import ProjectionStore
from service.runtime import Runtime

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Crash(RuntimeError):
    pass


@pytest.fixture(autouse=True)
def one_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The positions, pages and digests below are one partition's log (PostgreSQL
    splits a new store in 8, and the other partitions' rows then move on their own)."""
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "1")


def seed(rt: Runtime) -> str:
    """A projected session with a tool the next events will age."""
    sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", at=T0)
    rt.execute("append_node", sid, role="user", input="task", at=T0)
    rt.execute("append_node", sid, role="assistant", output="reading", at=T0)
    rt.execute("append_node", sid, role="tool", name="cat", output="x\n" * 50, at=T0)
    return str(sid)


def unprojected(rt: Runtime, sid: str, n: int) -> None:
    """Events written by the application but not yet caught up."""
    for i in range(n):
        when = T0 + timedelta(minutes=10 * (i + 1))
        rt.app.append_node(sid, role="assistant", output=f"turn {i}", at=when)
    rt.app.pin(sid, rt.app.session(sid).head, at=T0 + timedelta(hours=5))


def count(store: ProjectionStore, table: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar() or 0)


def crash_on_event(monkeypatch: pytest.MonkeyPatch, nth: int) -> list[int]:
    applied: list[int] = []
    original: Callable[..., None] = Projector.apply

    def flaky(self: Projector, event: Any, notification_id: int) -> None:
        if len(applied) + 1 == nth:
            raise Crash(f"injected failure on event {nth}")
        original(self, event, notification_id)
        applied.append(notification_id)

    monkeypatch.setattr(Projector, "apply", flaky)
    return applied


def assert_recovers_exactly_once(rt: Runtime, store_url: str, sid: str) -> None:
    rt.catch_up()
    assert rt.position() == rt.app.recorder.max_notification_id()
    assert rt.catch_up() == 0
    events = rt.app.session_events(sid)
    node_events = [e for e in events if type(e).__name__ == "NodeAppended"]
    with rt.store.engine.connect() as conn:
        c = t.commits.c
        commits = conn.execute(select(func.count()).where(c.session_id == sid)).scalar()
    assert count(rt.store, t.nodes) == len(node_events)
    assert commits == len(node_events) + 1, "one commit per node, plus the pin's recommit"
    head = rt.head_commit(sid)
    assert head["head_node_id"] == rt.app.session(sid).head
    assert [i["state"] for i in head["items"]].count("cleared") == 1, "aged, then idle"
    assert rebuild_and_compare(store_url)["identical"]


def test_a_failure_on_the_nth_event_rolls_the_whole_batch_back(
    rt: Runtime, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = seed(rt)
    position, before = rt.position(), digest(rt.store)
    head_before = rt.head_commit(sid)
    unprojected(rt, sid, 5)
    applied = crash_on_event(monkeypatch, 4)
    with pytest.raises(Crash):
        rt.catch_up()
    assert len(applied) == 3, "the failure really was midway"
    assert rt.position() == position
    assert digest(rt.store) == before
    assert rt.processor.projector is None, "memory that ran ahead is dropped"
    monkeypatch.undo()
    assert rt.head_commit(sid)["head_node_id"] != head_before["head_node_id"]
    assert_recovers_exactly_once(rt, store_url, sid)


def test_pages_before_the_failure_stay_committed(
    rt: Runtime, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = seed(rt)
    position = rt.position()
    unprojected(rt, sid, 5)
    crash_on_event(monkeypatch, 5)
    with pytest.raises(Crash):
        rt.processor.catch_up(page=2)
    assert rt.position() == position + 4, "two whole pages of two events each"
    kept = digest(rt.store)
    rest = rt.app.recorder.max_notification_id() - rt.position()  # the nodes not yet projected
    monkeypatch.undo()
    other = Runtime(store_url, auto_compact=False)  # a second process picks up the rest
    try:
        assert other.catch_up() == rest
        assert digest(rt.store) != kept
    finally:
        other.close()
    assert_recovers_exactly_once(rt, store_url, sid)


def test_a_failure_after_the_inserts_commits_none_of_them(
    rt: Runtime, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = seed(rt)
    position, before = rt.position(), digest(rt.store)
    unprojected(rt, sid, 5)
    original = ProjectionStore.write

    def write_then_die(self: ProjectionStore, conn: Any, outbox: Any, pos: int, *part: int) -> None:
        original(self, conn, outbox, pos, *part)
        raise Crash("injected failure after the rows and the position were written")

    monkeypatch.setattr(ProjectionStore, "write", write_then_die)
    with pytest.raises(Crash):
        rt.catch_up()
    assert rt.position() == position
    assert digest(rt.store) == before
    monkeypatch.undo()
    assert_recovers_exactly_once(rt, store_url, sid)


def test_a_stored_command_succeeds_even_if_the_catch_up_after_it_fails(
    rt: Runtime, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reporting an error for a committed command would make clients store it twice."""
    sid = seed(rt)
    before = len(rt.app.session_events(sid))
    crash_on_event(monkeypatch, 1)
    node, version = rt.execute("append_node", sid, role="assistant", output="late", at=T0)
    assert version == before + 1 and len(rt.app.session_events(sid)) == before + 1
    monkeypatch.undo()
    assert rt.head_commit(sid)["head_node_id"] == node, "the next read catches up"
    assert rebuild_and_compare(store_url)["identical"]


def test_processes_starting_together_share_one_tracking_row(store_url: str) -> None:
    """FOR UPDATE cannot lock a row that does not exist yet: the insert must not race."""
    import threading

    from projections.migrate import upgrade

    upgrade(store_url)
    stores = [ProjectionStore(store_url) for _ in range(4)]
    try:
        stores[0].truncate()  # no tracking row, as on a fresh or just-rebuilt database
        ready = threading.Barrier(len(stores))
        failures: list[BaseException] = []

        def enter(store: ProjectionStore) -> None:
            try:
                ready.wait()
                with store.batch() as (_, position):
                    assert position == 0
            except BaseException as exc:  # reported below
                failures.append(exc)

        threads = [threading.Thread(target=enter, args=(s,)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert failures == []
        assert count(stores[0], t.tracking) == 1
    finally:
        for store in stores:
            store.close()
