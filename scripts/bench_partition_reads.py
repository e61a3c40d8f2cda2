"""What a query of a quiet session costs while another partition holds large nodes.

Before a query the processor asks whether the log holds anything of the
query's partition past that partition's position.  With P > 1 it asked by
reading the notifications, states included, on every query: behind five
2 MB nodes of another session, each read of a quiet session read 10 MB.

One process appends five 2 MB nodes to a busy session; another reads a
quiet session of another partition 50 times.  Printed for P=1 and P=8 on a
scratch PostgreSQL database each: the median and p99 of a read, and the
bytes of event states the reads fetched (traced at psycopg's cursor).  At
P=1 the first read takes up the rows the writer projected, large nodes
included (one partition is the whole store): that read is the p99; rows
are not states and are not counted.

    python -m scripts.bench_partition_reads [--url postgresql://postgres@127.0.0.1/postgres]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import psycopg

from projections.partitions import hashed
from scripts.bench_limits import p99, scratch_database
from service.runtime import Runtime

BODY = 2 * 1024 * 1024
READS = 50


def traced_state_bytes() -> list[int]:
    """Bytes of binary values fetched (event states, payloads) from now on, a running
    total in [0]."""
    total = [0]
    fetchall = psycopg.Cursor.fetchall

    def counting(self: psycopg.Cursor[Any]) -> Any:
        rows = fetchall(self)
        for row in rows:
            values = row.values() if isinstance(row, dict) else row
            total[0] += sum(len(v) for v in values if isinstance(v, bytes | memoryview))
        return rows

    psycopg.Cursor.fetchall = counting  # type: ignore[method-assign]
    return total


def run(url: str, partitions: int) -> dict[str, float]:
    os.environ["CTXSTORE_PARTITIONS"] = str(partitions)
    writer = Runtime(url, auto_compact=False)
    reader = Runtime(url, auto_compact=False)
    try:
        quiet = str(writer.app.start_session("quiet", "local:tiny")[0])
        writer.execute("append_node", quiet, role="user", input="hello")
        busy = quiet
        while partitions > 1 and hashed(busy, partitions) == hashed(quiet, partitions):
            busy = str(writer.app.start_session("busy", "local:tiny")[0])
        if busy == quiet:
            busy = str(writer.app.start_session("busy", "local:tiny")[0])
        reader.branch_nodes(quiet)
        for n in range(5):
            writer.execute("append_node", busy, role="user", input=f"{n} " + "x" * BODY)
        fetchall = psycopg.Cursor.fetchall
        total = traced_state_bytes()
        times = []
        try:
            for _ in range(READS):
                began = time.perf_counter()
                reader.branch_nodes(quiet)
                times.append(time.perf_counter() - began)
        finally:
            psycopg.Cursor.fetchall = fetchall  # type: ignore[method-assign]
        return {"median": statistics.median(times) * 1000, "p99": p99(times),
                "mb_per_read": total[0] / READS / 1e6}  # fmt: skip
    finally:
        writer.close()
        reader.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default="postgresql://postgres@127.0.0.1/postgres",
        help="an admin URL: a scratch database is created there and dropped",
    )
    args = parser.parse_args(argv)
    print(f"{READS} reads of a quiet session, five {BODY >> 20} MB nodes in another session")
    print(f"{'partitions':>10} | {'median ms':>10} | {'p99 ms':>8} | {'state MB/read':>13}")
    for partitions in (1, 8):
        with scratch_database(args.url) as url:
            r = run(url, partitions)
        print(f"{partitions:>10} | {r['median']:>10.2f} | {r['p99']:>8.2f} | "
              f"{r['mb_per_read']:>13.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
