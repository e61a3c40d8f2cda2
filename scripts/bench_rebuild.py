"""Rebuild on P partitions with one process and with two, side by side (issue 14).

On a fresh PostgreSQL database (created and dropped here), writes SESSIONS
realistic agent sessions (``bench_projection.session_nodes``: tool calls,
large results, a minute a node so aging and idle clearing happen), their
appends interleaved in the log as concurrent agents' would be, split into
P partitions.  Then rebuilds every projection from the log with
``--processes 1`` and with ``--processes 2`` (``projections.parallel_catch_up``),
twice each, alternating, and prints the best time of each, their ratio (the
issue's target: >= 1.7x), whether every rebuild's digests equal the live
tables', and how many of the machine's cores each kept busy, which bounds
what any number of processes can reach here.  For reference, one more
rebuild runs one process on one partition (P=1, the default split).  Few
events or few sessions a partition measure the helpers' start-up (about a
second) and an uneven split more than the rebuild.

    python scripts/bench_rebuild.py [--sessions 64] [--nodes 400] [--partitions 8]
        [--admin postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_api import Busy  # noqa: E402  (after the path set-up above)
from scripts.bench_projection import T0, session_nodes  # noqa: E402
from scripts.bench_throughput import create_database, drop_database  # noqa: E402

TARGET = 1.7


def fill(url: str, sessions: int, nodes: int, partitions: int) -> int:
    """The sessions, their nodes appended round-robin in chunks of five; events stored."""
    from domain.application import CtxStore
    from projections.migrate import upgrade
    from projections.processor import Processor
    from projections.store import ProjectionStore
    from service.runtime import Runtime

    upgrade(url)
    Runtime(url, auto_compact=False, partitions=partitions).close()  # P, stored with the rows
    app = CtxStore(url=url)
    try:
        sids = [app.start_session(f"agent {n}", "openai:gpt-4o", at=T0)[0]
                for n in range(sessions)]  # fmt: skip
        feeds = [session_nodes(seed=n) for n in range(sessions)]
        for _ in range(0, nodes, 5):
            for sid, feed in zip(sids, feeds, strict=True):
                for _ in range(5):
                    app.append_node(sid, **next(feed))
        store = ProjectionStore(url)
        try:
            from domain.policy import Policy

            Processor(app, store, Policy()).catch_up()  # the live tables to compare with
        finally:
            store.close()
        return app.recorder.max_notification_id() or 0
    finally:
        app.close()


def timed_rebuild(url: str, processes: int) -> tuple[float, float, bool]:
    """(seconds, cores busy, digests equal to the live tables')."""
    from projections.rebuild import rebuild_and_compare

    started = time.perf_counter()
    with Busy() as busy:
        result = rebuild_and_compare(url, processes=processes)
    seconds = time.perf_counter() - started
    return float(result["seconds"]) or seconds, busy.cores, bool(result["identical"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=400)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    os.environ["CTXSTORE_PARTITIONS"] = str(args.partitions)  # the rebuilds keep this split
    url = create_database(args.admin)
    try:
        events = fill(url, args.sessions, args.nodes, args.partitions)
        print(f"PostgreSQL, {args.sessions} sessions x {args.nodes} nodes, {events:,} events, "
              f"P={args.partitions}, {os.cpu_count()} cores")  # fmt: skip
        runs: dict[int, list[tuple[float, float, bool]]] = {1: [], 2: []}
        for _ in range(args.rounds):
            for processes in (1, 2):
                runs[processes].append(timed_rebuild(url, processes))
        os.environ["CTXSTORE_PARTITIONS"] = "1"
        unsplit = timed_rebuild(url, 1)
        os.environ["CTXSTORE_PARTITIONS"] = str(args.partitions)
    finally:
        drop_database(args.admin, url)
    print(f"\n{'rebuild':<14} {'best s':>8} {'events/s':>10} {'cores busy':>11} identical")
    best = {}
    for processes, rows in runs.items():
        seconds, cores, _ = min(rows)
        best[processes] = (seconds, cores)
        identical = all(ok for _, _, ok in rows)
        print(f"{processes} process{'es' if processes > 1 else '':<4}  {seconds:8.2f} "
              f"{events / seconds:10,.0f} {cores:11.2f} {identical}")  # fmt: skip
    print(f"{'1 process P=1':<14} {unsplit[0]:8.2f} {events / unsplit[0]:10,.0f} "
          f"{unsplit[1]:11.2f} {unsplit[2]}")  # fmt: skip
    ratio = best[1][0] / best[2][0]
    cores = os.cpu_count() or 1
    print(
        f"\ntwo processes / one: {ratio:.2f}x (target >= {TARGET}x); "
        f"two on P={args.partitions} / one on P=1: {unsplit[0] / best[2][0]:.2f}x"
    )
    print(f"One process kept {best[1][1]:.2f} of {cores} cores busy (itself and the database): "
          f"at the same CPU an event, no number of processes can pass "
          f"{cores / best[1][1]:.2f}x of it on this machine.")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
