"""What ``bench_peers`` reads off the systems besides timing turns: a fresh process's cold
first read and peak memory, a store's bytes, the PostgreSQL databases of a run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from scripts.coding_workload import workload
from scripts.peer_systems import ROOT, Ctx, Lg, Sdk, sdk_items

PG_ADMIN = os.environ.get("CTXSTORE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


_SDK_COLD = """
import asyncio, resource, sys, time
async def main():
    if sys.argv[1] == "sqlite":
        from agents import SQLiteSession
        session = SQLiteSession(sys.argv[3], sys.argv[2])
    else:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        session = SQLAlchemySession.from_url(sys.argv[3], url=sys.argv[2])
    t0 = time.perf_counter()
    await session.get_items()
    print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
asyncio.run(main())
"""


def sdk_cold(sdk: Sdk, name: str) -> tuple[float, float]:
    """A fresh process (the SDK imported, the session open): its first ``get_items()``, in
    seconds, and the process's peak RSS after it, in MB."""
    args = ["sqlite", str(sdk.path)] if sdk.pg_url is None else ["pg", sdk.pg_url]
    out = subprocess.run([sys.executable, "-c", _SDK_COLD, *args, name], check=True,
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    seconds, rss_kb = out.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(rss_kb) / 1024


_LG_COLD = """
import asyncio, sys, time
from pathlib import Path
from scripts.peer_systems import Lg
async def main():
    lg = Lg(Path(sys.argv[2]), None) if sys.argv[1] == "sqlite" else Lg(None, sys.argv[2])
    await lg.open()
    t0 = time.perf_counter()
    await lg.feed(sys.argv[3])
    print(time.perf_counter() - t0)
    await lg.close()
asyncio.run(main())
"""


def lg_cold(lg: Lg, thread: str) -> float:
    """A fresh process (LangGraph imported, the checkpointer set up and the graph compiled): its
    first read of the thread's state, trimmed."""
    args = ["sqlite", str(lg.path)] if lg.pg_url is None else ["pg", lg.pg_url]
    out = subprocess.run([sys.executable, "-c", _LG_COLD, *args, thread], check=True,
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


async def ctx_cold(ctx: Ctx, sid: str) -> float:
    """A fresh server (healthy, nothing read yet): its first render of a full session."""
    ctx.start()
    async with ctx.client() as client:
        t0 = time.perf_counter()
        await ctx.feed(client, sid)
        return time.perf_counter() - t0


def peak_rss_mb(pid: int) -> float:
    """The peak resident set (VmHWM) of ``pid`` and its children (more than one worker), MB."""
    pids = [pid]
    with contextlib.suppress(OSError):
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    total = 0
    for p in pids:
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    return total / 1024


async def ctx_memory(ctx: Ctx, sid: str) -> float:
    """A fresh server's peak RSS (MB) after it served one render of one session."""
    ctx.start()
    try:
        async with ctx.client() as client:
            await ctx.feed(client, sid)
        assert ctx.proc is not None
        return peak_rss_mb(ctx.proc.pid)
    finally:
        ctx.stop()


async def enlarge(ctxs: dict[str, Ctx], sdk: Sdk, extra: int, turns: int, clients: int) -> None:
    """``extra`` more turns in every store (ctxstore's through its server), as sessions of up to
    ``turns`` turns, ``clients`` of them written at once: appends only, no reads."""
    lengths = [min(turns, extra - k) for k in range(0, extra, turns)]

    async def ctx_writer(ctx: Ctx, jobs: list[tuple[int, int]]) -> None:
        async with ctx.client() as client:
            while jobs:
                s, n = jobs.pop()
                sid = await ctx.open(client, f"mem-{s}")
                for turn in workload(1000 + s, n):
                    await ctx.append(client, sid, turn)

    async def sdk_writer(jobs: list[tuple[int, int]]) -> None:
        while jobs:
            s, n = jobs.pop()
            session = sdk.session(f"mem-{s}")
            for turn in workload(1000 + s, n):
                await session.add_items(sdk_items(turn))
            if sdk.pg_url is None:
                session.close()

    for ctx in ctxs.values():
        ctx.start()
        try:
            jobs = list(enumerate(lengths))
            await asyncio.gather(*(ctx_writer(ctx, jobs) for _ in range(clients)))
        finally:
            ctx.stop()
    jobs = list(enumerate(lengths))
    await asyncio.gather(*(sdk_writer(jobs) for _ in range(clients)))
    await sdk.close()


def sqlite_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


# -- PostgreSQL databases of the run --------------------------------------------------------


def pg_create(name: str) -> tuple[str, int]:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return PG_ADMIN.rsplit("/", 1)[0] + f"/{name}", pg_bytes(name)


def pg_bytes(name: str) -> int:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
    return int(row[0]) if row else 0


def pg_drop(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
