"""``ctxstore worker`` processes split the partitions by leases (issue 14).

A worker killed while it holds partitions stops renewing them; once they
expire another worker takes them over, and what the killed one left half
done is neither lost nor applied twice (the tracking rows decide that, not
the leases: a batch that died rolled back whole).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from projections.leases import Leases
from projections.rebuild import rebuild_and_compare
from projections.store import ProjectionStore
from service.runtime import Runtime
from tests.conftest import opened_app

ROOT = Path(__file__).resolve().parents[2]
# After the dead worker's leases end, the survivor takes them at its next round
# (every 0.05 s, plus the catch-up of what it holds, slow on a loaded machine).
TAKEOVER = 5.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_workers_take_fair_shares_and_a_dead_ones_partitions_after_expiry(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    Runtime(store_url, auto_compact=False).close()
    store, clock = ProjectionStore(store_url), Clock()
    try:
        a = Leases(store, "a", 4, seconds=10, clock=clock)
        b = Leases(store, "b", 4, seconds=10, clock=clock)
        assert a.renew() == [0, 1, 2, 3], "alone: every partition"
        assert b.renew() == [], "nothing is free until a renews"
        assert a.renew() == [0, 1], "a sees b and lets half go"
        assert b.renew() == [2, 3]
        clock.now += 5
        assert b.renew() == [2, 3]  # a stops renewing here: it died
        clock.now += 4.9
        assert b.renew() == [2, 3], "a's leases still run"
        clock.now += 0.2
        assert b.renew() == [0, 1, 2, 3], "expired: b takes them over"
        assert {owner for owner, _ in store_holders(b).values()} == {"b"}
        b.release()
        assert store_holders(b) == {}
    finally:
        store.close()


def store_holders(leases: Leases) -> dict[int, tuple[str, float]]:
    return leases.holders()


def _worker(url: str, lease: float) -> subprocess.Popen[bytes]:
    env = dict(os.environ, CTXSTORE_PARTITIONS="4", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "scripts.cli", "worker", "--db", url, "--interval", "0.05",
           "--lease", str(lease)]  # fmt: skip
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip


def _until(check: object, what: str, limit: float = 90) -> None:
    deadline = time.monotonic() + limit  # a bound on a hang, not a timing assertion
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


def test_a_killed_workers_partitions_are_taken_over_with_nothing_lost_or_twice(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    Runtime(store_url, auto_compact=False).close()
    store = ProjectionStore(store_url)
    leases = Leases(store, "observer", 4)
    first = _worker(store_url, lease=3)
    second: subprocess.Popen[bytes] | None = None
    try:
        _until(lambda: len(leases.holders()) == 4, "the first worker holds every partition")
        with opened_app(store_url) as app:  # a client writing while the workers project
            sids = [str(app.start_session(f"s{n}", "local:tiny")[0]) for n in range(8)]
            second = _worker(store_url, lease=3)
            _until(lambda: len({o for o, _ in leases.holders().values()}) == 2, "a split")
            for i in range(40):
                app.append_node(sids[i % 8], role="user", input=f"message {i}")
            first.send_signal(signal.SIGKILL)  # mid-work, leases held, no goodbye
            first.wait()
            killed = {p: until for p, (o, until) in leases.holders().items()
                      if o != _owner_of(leases, second)}  # fmt: skip
            for i in range(40, 80):
                app.append_node(sids[i % 8], role="user", input=f"message {i}")
            newest = app.recorder.max_notification_id()
        assert killed, "the killed worker held partitions when it died"
        expiry = max(killed.values())  # the killed worker renewed them last before this
        dead = {p: o for p, (o, _) in leases.holders().items() if p in killed}
        while len({o for o, _ in leases.holders().values()}) != 1:
            holders = leases.holders()
            if time.time() < min(killed.values()) - 0.5:  # leases are honoured until they end
                assert all(holders.get(p, ("",))[0] == dead[p] for p in killed), holders
            assert time.time() < expiry + TAKEOVER, "not taken over within the lease time"
            time.sleep(0.05)
        assert time.time() < expiry + TAKEOVER, "not taken over within the lease time"
        assert set(leases.holders()) == {0, 1, 2, 3}
        _until(lambda: min(store.positions().values()) >= newest, "everything projected")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
        store.close()
    rt = Runtime(store_url, auto_compact=False)
    try:
        assert sum(rt.session_info(sid)["counts"]["nodes"] for sid in sids) == 80
    finally:
        rt.close()
    result = rebuild_and_compare(store_url)
    assert result["identical"]


def _owner_of(leases: Leases, proc: subprocess.Popen[bytes] | None) -> str:
    """The lease owner name of a worker process (host:pid:tag)."""
    assert proc is not None
    for owner, _ in leases.holders().values():
        if f":{proc.pid}:" in owner:
            return owner
    return ""
