"""How long a small append waits while another process appends large events (PostgreSQL).

Appends keep notification ids in commit order under the events table's
EXCLUSIVE lock.  This bench creates a fresh database under ``--url`` (an
admin connection), then measures one process's small appends (one event of
a few bytes each, straight to the recorder) alone, and while a second
process appends 4 MB events as fast as it can: text that compresses well
(repeated words, as ``bench_limits`` sends) and text that does not (random
hex, like a binary dump or minified data).  It prints p50 and p99 of the
small appends, and how long each large append took.

    python -m scripts.bench_large_append [--appends 300] [--url postgresql://postgres@host/postgres]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import time
import uuid
from typing import Any

import psycopg
from eventsourcing.persistence import StoredEvent

LARGE = 4 * 1024 * 1024


def _app(url: str) -> Any:
    from domain.application import CtxStore

    return CtxStore(url=url)


def _large_state(kind: str) -> bytes:
    if kind == "words":
        text = "the quick brown fox jumps over a lazy dog while tokens pile up " * (LARGE // 64)
    else:
        text = os.urandom(LARGE // 2).hex()
    return b'{"output":"' + text.encode() + b'"}'


def _append_large(url: str, kind: str, stop: Any, took: Any) -> None:
    app = _app(url)
    state = _large_state(kind)
    try:
        while not stop.is_set():
            started = time.perf_counter()
            app.recorder.insert_events([StoredEvent(uuid.uuid4(), 1, "bench:Large", state)])
            took.append(time.perf_counter() - started)
    finally:
        app.close()


def _small(app: Any, count: int) -> list[float]:
    out = []
    for _ in range(count):
        started = time.perf_counter()
        app.recorder.insert_events([StoredEvent(uuid.uuid4(), 1, "bench:Small", b"{}")])
        out.append(time.perf_counter() - started)
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1000 if ordered else math.nan


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1/postgres")
    args = parser.parse_args(argv)
    name = f"ctxstore_bench_large_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(args.url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = args.url.rsplit("/", 1)[0] + "/" + name
    try:
        app = _app(url)
        try:
            _small(app, 50)  # warm up
            rows = [("alone", _small(app, args.appends), [])]
            spawn = multiprocessing.get_context("spawn")
            for kind in ("words", "random"):
                with spawn.Manager() as manager:
                    stop, took = manager.Event(), manager.list()
                    other = spawn.Process(target=_append_large, args=(url, kind, stop, took))
                    other.start()
                    while not took:  # the first large append is in
                        time.sleep(0.05)
                    small = _small(app, args.appends)
                    stop.set()
                    other.join()
                    rows.append((f"while 4 MB {kind} appended", small, list(took)))
        finally:
            app.close()
    finally:
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    base = _pct(rows[0][1], 0.99)
    print(f"{'small appends':34} | {'p50':>8} | {'p99':>8} | {'p99 / alone':>11} | large append")
    for label, small, large in rows:
        each = f"{sum(large) / len(large) * 1000:.0f} ms x {len(large)}" if large else "-"
        print(f"{label:34} | {_pct(small, 0.5):6.1f} ms | {_pct(small, 0.99):6.1f} ms | "
              f"{_pct(small, 0.99) / base:10.1f}x | {each}")  # fmt: skip


if __name__ == "__main__":
    main()
