"""Benchmark the write side: append throughput and session reload time.

For each store (a temporary SQLite file; a temporary PostgreSQL database,
created and dropped here):

(a) baseline: a bare ``eventsourcing`` application whose trivial aggregate
    has one ``@event`` method appending a small payload; N events, each
    saved by its own ``app.save`` call.  Events/s.
(b) ctxstore: ``CtxStore.append_node`` N times (user, assistant, tool,
    tool, assistant, ... with ~200-character payloads), each a full command
    (load from the cache, validate, save).  Events/s and the ratio of
    baseline to ctxstore throughput (target: ctxstore at most 2x slower).
(c) reload of that N-node session by a fresh ``CtxStore`` without an
    aggregate cache, with snapshots (CtxStore snapshots every 500 events)
    and with snapshotting disabled (``IS_SNAPSHOTTING_ENABLED=n``, so the
    repository replays every event).  Median of 5, in ms (target < 50 ms
    with snapshots).

    .venv/bin/python scripts/bench_write.py [--nodes 10000] [--stores sqlite,postgres]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from eventsourcing.application import Application  # noqa: E402
from eventsourcing.domain import Aggregate, event  # noqa: E402

from domain.application import CtxStore  # noqa: E402
from domain.store_config import eventsourcing_env  # noqa: E402

PG_ADMIN_URL = os.environ.get(
    "CTXSTORE_BENCH_PG_URL",
    os.environ.get("CTXSTORE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
)
RATIO_TARGET = 2.0
RELOAD_TARGET_MS = 50.0
RUNS = 5
PAYLOAD = ("The quick brown fox jumps over the lazy dog; " * 5)[:200]


class Counter(Aggregate):
    """The baseline: one event method, a small payload, almost no state."""

    def __init__(self) -> None:
        self.count = 0

    @event("Appended")
    def append(self, payload: str) -> None:
        self.count += 1


class Baseline(Application[UUID]):
    name = "baseline"


@contextmanager
def store(kind: str) -> Iterator[Callable[[str], str]]:
    """Yields ``url_for(app_name)``: a fresh database URL per benchmark part."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="ctxstore-bench-") as tmp:
            yield lambda part: f"sqlite:///{Path(tmp) / (part + '.db')}"
        return
    import psycopg

    conninfo = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://")
    name = f"ctxstore_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    try:
        yield lambda part: url  # one database: the two applications use their own tables
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def bench_baseline(url: str, n: int) -> float:
    app = Baseline(eventsourcing_env(url))
    try:
        counter = Counter()
        app.save(counter)
        start = time.perf_counter()
        for _ in range(n):
            counter.append(PAYLOAD)
            app.save(counter)
        elapsed = time.perf_counter() - start
        assert counter.version == n + 1
        return n / elapsed
    finally:
        app.close()


def node_kwargs(i: int) -> dict[str, Any]:
    """user, assistant, tool, tool, assistant, user, ... with ~200-char payloads."""
    kind = i % 5
    if kind == 0:
        return {"role": "user", "input": f"{i}: {PAYLOAD}"}
    if kind in (1, 4):
        return {"role": "assistant", "output": f"{i}: {PAYLOAD}"}
    return {"role": "tool", "name": "grep", "input": {"q": f"q{i}"}, "output": f"{i}: {PAYLOAD}"}


def bench_ctxstore(url: str, n: int) -> tuple[float, UUID]:
    app = CtxStore(url=url)
    try:
        sid, _ = app.start_session(title="bench", model="openai:gpt-4o")
        start = time.perf_counter()
        for i in range(n):
            app.append_node(sid, **node_kwargs(i))
        elapsed = time.perf_counter() - start
        return n / elapsed, sid
    finally:
        app.close()


def reload_ms(url: str, sid: UUID, snapshots: bool) -> tuple[float, int, int | None]:
    """Median reload time, the version reloaded, and the snapshot used (if any)."""
    env = {"AGGREGATE_CACHE_MAXSIZE": ""}  # no cache: every get() reads the store
    if not snapshots:
        env["IS_SNAPSHOTTING_ENABLED"] = "n"
    app = CtxStore(url=url, env=env)
    try:
        assert app.repository.cache is None and (app.snapshots is not None) == snapshots
        snapshot: int | None = None
        if app.snapshots is not None:
            latest = list(app.snapshots.get(sid, desc=True, limit=1))
            assert latest, "no snapshot was taken"
            snapshot = latest[0].originator_version
        app.recorder.max_notification_id()  # open the connection outside the timing
        times, version = [], 0
        for _ in range(RUNS):
            start = time.perf_counter()
            agg: Any = app.repository.get(sid)
            times.append((time.perf_counter() - start) * 1000)
            version = agg.version
        return statistics.median(times), version, snapshot
    finally:
        app.close()


def run(kind: str, n: int) -> dict[str, Any]:
    with store(kind) as url_for:
        base = bench_baseline(url_for("baseline"), n)
        ours, sid = bench_ctxstore(url_for("ctxstore"), n)
        snap_ms, version, snapshot = reload_ms(url_for("ctxstore"), sid, snapshots=True)
        full_ms, full_version, _ = reload_ms(url_for("ctxstore"), sid, snapshots=False)
        assert version == full_version == n + 1
    return {"store": kind, "baseline": base, "ctxstore": ours, "ratio": base / ours,
            "snap_ms": snap_ms, "full_ms": full_ms, "snapshot": snapshot}  # fmt: skip


def table(rows: list[dict[str, Any]], n: int) -> str:
    head = (f"{'store':<9} {'baseline ev/s':>14} {'ctxstore ev/s':>14} {'ratio':>7} "
            f"{'reload snap ms':>15} {'reload full ms':>15} {'snapshot at':>12}")  # fmt: skip
    lines = [f"write benchmark: {n:,} nodes, reload median of {RUNS}", head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['store']:<9} {r['baseline']:>14,.0f} {r['ctxstore']:>14,.0f} "
            f"{r['ratio']:>6.2f}x {r['snap_ms']:>15.1f} {r['full_ms']:>15.1f} "
            f"{'v' + str(r['snapshot']):>12}"
        )
    lines.append(f"targets: ratio <= {RATIO_TARGET:.0f}x, reload with snapshots "
                 f"< {RELOAD_TARGET_MS:.0f} ms")  # fmt: skip
    for r in rows:
        verdict = [
            "ratio " + ("ok" if r["ratio"] <= RATIO_TARGET else "OVER"),
            "reload " + ("ok" if r["snap_ms"] < RELOAD_TARGET_MS else "OVER"),
        ]
        lines.append(f"  {r['store']}: " + ", ".join(verdict))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--stores", default="sqlite,postgres")
    args = parser.parse_args(argv)
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    for kind in stores:
        if kind not in ("sqlite", "postgres"):
            parser.error(f"unknown store {kind!r}: use sqlite and/or postgres")
    rows = []
    for kind in stores:
        print(f"running {kind} ...", file=sys.stderr, flush=True)
        rows.append(run(kind, args.nodes))
    print(table(rows, args.nodes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
