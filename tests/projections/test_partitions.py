"""Projection split into partitions (issue 14): same tables as one projector would write.

``CTXSTORE_PARTITIONS`` is read when a store's tracking rows are created.
Sessions land in partitions by a hash of their lineage root; here the hash
is replaced by "the order first seen", so the two seed sessions of the
invariant driver are always in different partitions and every attach and
merge between them crosses partitions.
"""

from __future__ import annotations

import threading
from pathlib import Path
from uuid import UUID

import pytest

from projections import partitions
from projections.rebuild import rebuild_and_compare
from service.bootstrap import open_runtime
from service.runtime import Runtime
from service.settings import Settings
from tests.projections.test_invariants import run_session


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four partitions; sessions round-robin over them in the order they are first seen."""
    order: dict[str, int] = {}
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    monkeypatch.setattr(partitions, "hashed",
                        lambda sid, p: order.setdefault(sid, len(order)) % p)  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1])
def test_attach_and_merge_across_partitions_keep_every_invariant(
    store_url: str, split: None, seed: int
) -> None:
    """The busy session of test_invariants, its sessions split: live equals a rebuild."""
    ops = ["tool", "assistant", "tool", "pin", "user", "branch", "tool", "attach", "attach",
           "retry", "checkout", "assistant", "merge", "edit", "unpin", "model", "usage",
           "compact", "tool", "assistant", "attach", "merge", "assistant"]  # fmt: skip
    steps = [(op, (n * 7 + seed) % 4, n * 31 + seed, n * 17 + 3 * seed, (20, 61, 5)[n % 3])
             for n, op in enumerate(ops)]  # fmt: skip
    driver = run_session(store_url, steps, lambda _: None)
    rt = Runtime(store_url, auto_compact=False)
    try:
        homes = {rt.processor.partition_of(s.sid) for s in driver.sessions}
        assert rt.processor.partitions == 4 and len(homes) > 1, homes
    finally:
        rt.close()


def test_two_processes_appending_side_by_side_project_every_node(
    store_url: str, split: None
) -> None:
    """Two runtimes (two API processes) share 8 sessions over 4 partitions, 4 threads each."""
    if store_url.startswith("sqlite"):
        pytest.skip("side by side writers are PostgreSQL's: SQLite has one writer (P=1 there)")
    first, second = Runtime(store_url, auto_compact=False), Runtime(store_url, auto_compact=False)
    try:
        sids = [str(first.execute("start_session", f"s{n}", "local:tiny")[0]) for n in range(8)]
        errors: list[BaseException] = []

        def client(rt: Runtime, worker: int) -> None:
            try:
                for i in range(12):
                    sid = sids[(worker * 3 + i) % len(sids)]
                    rt.execute("append_node", sid, role="user", input=f"w{worker} {i}")
                    if i % 5 == 4:  # reads another partition's session as of the event
                        rt.execute("attach", sid, sids[(worker + i + 1) % len(sids)])
            except BaseException as exc:  # noqa: BLE001  (reported below)
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(rt, w))
                   for w, rt in enumerate([first, second] * 4)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        stored = sum(first.app.session(sid).version - 1 for sid in sids)
        projected = sum(second.session_info(sid)["counts"]["events"] - 1 for sid in sids)
        assert projected == stored
        nodes = sum(first.session_info(sid)["counts"]["nodes"] for sid in sids)
        assert nodes == 8 * 12 + sum(1 for w in range(8) for i in range(12) if i % 5 == 4)
    finally:
        first.close()
        second.close()
    result = rebuild_and_compare(store_url)
    assert result["identical"], {
        k for k in result["after"] if result["before"][k] != result["after"][k]
    }


def test_the_partition_count_stored_with_the_rows_wins(
    store_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    Runtime(store_url, auto_compact=False).close()
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "2")  # another process, configured otherwise
    rt = Runtime(store_url, auto_compact=False)
    try:
        assert rt.processor.partitions == 4
        assert sorted(rt.store.positions()) == [0, 1, 2, 3]
    finally:
        rt.close()


def test_a_partition_count_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="CTXSTORE_PARTITIONS"):
        partitions.configured({"CTXSTORE_PARTITIONS": "0"})
    assert partitions.configured({}) == 1
    assert partitions.configured({}, postgres=True) == partitions.POSTGRES_PARTITIONS == 8
    assert partitions.configured({"CTXSTORE_PARTITIONS": "1"}, postgres=True) == 1
    with pytest.raises(ValueError, match="CTXSTORE_PARTITIONS"):  # at start-up, with the rest
        Settings.from_env({"CTXSTORE_PARTITIONS": "many"})


def test_the_settings_partition_count_reaches_a_new_store(store_url: str) -> None:
    rt = open_runtime(Settings.from_env({"CTXSTORE_PARTITIONS": "3"}), store_url,
                      auto_compact=False)  # fmt: skip
    try:
        assert rt.processor.partitions == 3
    finally:
        rt.close()


def test_an_erasure_across_partitions_moves_every_row_and_keeps_each_session_home(
    store_url: str, split: None
) -> None:
    """An erasure re-projects sessions of other partitions: each one stays in its own
    partition, every tracking row ends at the log's end, and a rebuild agrees."""
    from sqlalchemy import select

    from projections import tables as t
    from service.erasure import Eraser

    rt = Runtime(store_url, auto_compact=False)
    try:
        a, b, c = (str(rt.execute("start_session", title=n)[0]) for n in "abc")
        for sid in (a, b, c):
            for n in range(3):
                rt.execute("append_node", sid, role="user", output=f"{sid[:4]} turn {n}")
        rt.execute("attach", c, b)  # c (partition 2) copies b's content (partition 1)
        rt.execute("attach", c, a)
        homes = {sid: rt.processor.partition_of(sid) for sid in (a, b, c)}
        assert homes == {a: 0, b: 1, c: 2}, homes
        Eraser(rt).erase(b, "test")
        top = rt.app.recorder.max_notification_id()
        assert rt.store.positions() == dict.fromkeys(range(4), top)
        with rt.store.engine.connect() as conn:
            query = select(t.sessions.c.session_id, t.sessions.c.partition)
            stored = {str(sid): int(p) for sid, p in conn.execute(query)}
        assert stored == {a: 0, c: 2}, stored
        assert rt.rendered(c, "neutral")  # the referrer still renders, from its new rows
    finally:
        rt.close()
    result = rebuild_and_compare(store_url)
    assert result["identical"], result


def test_the_stream_watcher_wakes_a_partition_that_moves_below_the_furthest(
    store_url: str, split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partitions advance out of step: a session whose partition catches up to where
    another partition already is must still wake its streams (the furthest position
    does not move; the lowest would hold the other partition's changes back)."""
    import asyncio

    from api.stream_watcher import StreamWatcher

    rt = Runtime(store_url, auto_compact=False)
    try:
        a, b = (str(rt.execute("start_session", title=n)[0]) for n in "ab")
        pa, pb = rt.processor.partition_of(a), rt.processor.partition_of(b)
        assert pa != pb
        # from here, only the test catches up (as a worker would, one partition at a time)
        monkeypatch.setattr(rt, "_follow", lambda command, result: None)
        rt.auto_catch_up = False

        async def scenario() -> None:
            watcher = StreamWatcher(rt, 0.01)
            wake_a, wake_b = watcher.subscribe(a), watcher.subscribe(b)
            await asyncio.wait_for(wake_a.wait(), 10)  # a new watcher wakes everyone once
            await asyncio.sleep(0.05)
            wake_a.clear(), wake_b.clear()
            await asyncio.to_thread(rt.execute, "append_node", b, role="user", output="b1")
            await asyncio.to_thread(rt.execute, "append_node", a, role="user", output="a1")
            await asyncio.to_thread(rt.processor.catch_up, partition=pa)  # a's: the furthest
            await asyncio.wait_for(wake_a.wait(), 10)
            assert not wake_b.is_set()
            await asyncio.to_thread(rt.processor.catch_up, partition=pb)  # b's, to the same
            assert rt.store.positions()[pa] == rt.store.positions()[pb]
            await asyncio.wait_for(wake_b.wait(), 10)
            watcher.unsubscribe(a, wake_a), watcher.unsubscribe(b, wake_b)
            assert watcher._task is not None
            await asyncio.wait_for(watcher._task, 10)

        asyncio.run(scenario())
    finally:
        rt.close()


def test_an_online_rebuild_compares_and_switches_partition_by_partition(
    store_url: str, split: None
) -> None:
    """Live partitions stand at different positions (each command catches up its own):
    the shadow stops at each one's, digests agree, and the switch keeps every append."""
    from projections.online_rebuild import online_rebuild

    rt = Runtime(store_url, auto_compact=False)
    try:
        sids = [str(rt.execute("start_session", title=f"s{n}")[0]) for n in range(4)]
        for n in range(24):
            rt.execute("append_node", sids[n % 4], role="user", output=f"turn {n}")
        rt.execute("attach", sids[1], sids[0])  # across partitions
        assert len(set(rt.store.positions().values())) > 1, "partitions out of step"
        stop, appended = threading.Event(), []

        def client() -> None:
            n = 0
            while not stop.is_set():
                rt.execute("append_node", sids[n % 4], role="user", output=f"live {n}")
                appended.append(n)
                n += 1

        thread = threading.Thread(target=client)
        thread.start()
        try:
            done = online_rebuild(store_url)
        finally:
            stop.set()
            thread.join()
        assert done.identical and done.switched, (done.before, done.after)
        rt.catch_up()
        nodes = sum(rt.session_info(sid)["counts"]["nodes"] for sid in sids)
        assert nodes == 24 + 1 + len(appended)  # the attach is a node too
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_a_branch_is_found_in_its_sources_partition_from_inside_a_batch(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that meets a branch's later event without its start looks the start up
    on the batch's own connection (SQLite).  That lookup asked for the id with dashes,
    which SQLite's recorder stores without: nothing was found, the branch was taken
    for a root of its own partition, and a fresh process projected its event a second
    time there (UNIQUE ctx_nodes.session_id, seq)."""
    from projections.notification_reads import first_event
    from projections.partitions import hashed

    monkeypatch.setenv("CTXSTORE_PARTITIONS", "8")
    rt = Runtime(store_url, auto_compact=False)
    try:
        src = str(rt.app.start_session("source", "local:tiny")[0])
        rt.execute("append_node", src, role="user", input="go")
        head = rt.app.session(src).head
        branch = src
        while hashed(branch, 8) == hashed(src, 8):  # a branch whose own hash is elsewhere
            branch = str(rt.execute("branch", src, head)[0])
        rt.execute("append_node", branch, role="user", input="in the branch")
        with rt.store.engine.connect() as conn:
            found = first_event(rt.app.recorder, conn, UUID(branch))
        assert found is not None and found.originator_version == 1
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]  # a fresh process catches up first
