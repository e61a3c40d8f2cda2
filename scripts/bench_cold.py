"""A fresh server's first read, this tree against another, alternating starts (issue 29).

``bench_peers`` times the cold read among four systems, each started in turn,
and one run's median moved by a fifth between runs of the same code.  This
script isolates the one figure: it writes the sessions once through this
tree's server (interleaved turn by turn, as the peers bench writes them),
copies the store for each tree, then starts each tree's server in turn
(``--starts`` times each, the order alternating, a second of quiet before
each) and times its first ``GET /render`` of the first session.  It prints
the median and the quartiles of each, and their ratio.

    python -m scripts.bench_cold --base-tree /tmp/base [--store sqlite|pg] [--starts 12]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from scripts.coding_workload import workload
from scripts.peer_probes import PG_ADMIN, ctx_cold, pg_create, pg_drop
from scripts.peer_systems import Ctx

ORIGINAL, COPY = "ctx_cold_main", "ctx_cold_base"  # PostgreSQL databases


async def fill(ctx: Ctx, sessions: int, turns: int) -> list[str]:
    """``sessions`` sessions of ``turns`` turns, appended turn by turn across them."""
    ctx.start()
    try:
        async with ctx.client() as client:
            sids = [await ctx.open(client, f"cold-{k}") for k in range(sessions)]
            plans = [list(workload(7 + k, turns)) for k in range(sessions)]
            for t in range(turns):
                for sid, plan in zip(sids, plans, strict=True):
                    await ctx.append(client, sid, plan[t])
        return sids
    finally:
        ctx.stop()


async def first_read(ctx: Ctx, sid: str) -> float:
    """``peer_probes.ctx_cold``, the server stopped after it."""
    try:
        return await ctx_cold(ctx, sid)
    finally:
        ctx.stop()


def stores(args: argparse.Namespace, work: Path) -> tuple[str, str]:
    """The store this tree writes, and where the base tree's copy of it goes."""
    if args.store == "sqlite":
        return f"sqlite:///{work}/main.db", f"sqlite:///{work}/base.db"
    pg_drop(COPY)
    url = pg_create(ORIGINAL)[0]
    return url, url.rsplit("/", 1)[0] + f"/{COPY}"


def copy_store(args: argparse.Namespace, work: Path) -> None:
    if args.store == "sqlite":
        shutil.copy(work / "main.db", work / "base.db")
        return
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{COPY}" TEMPLATE "{ORIGINAL}"')


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-tree", type=Path, required=True)
    parser.add_argument("--store", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--starts", type=int, default=12)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ctx-cold-"))
    try:
        main_url, base_url = stores(args, work)
        sids = await fill(Ctx(main_url, 1), args.sessions, args.turns)
        copy_store(args, work)
        trees = {"ctxstore": Ctx(main_url, 1), "ctxstore base": Ctx(base_url, 1, args.base_tree)}
        reads: dict[str, list[float]] = {name: [] for name in trees}
        names = list(trees)
        for start in range(args.starts * len(names)):
            order = names if start // len(names) % 2 == 0 else names[::-1]  # alternating
            name = order[start % len(names)]
            time.sleep(1.0)  # what the last start left (its exit, its writes) settles
            reads[name].append(await first_read(trees[name], sids[0]))
        print(f"# bench_cold: {args.store}, {args.sessions} x {args.turns} turns, "
              f"{args.starts} fresh starts each, alternating; base {args.base_tree}")  # fmt: skip
        print("| first read (ms) | median | lower quartile | upper quartile |")
        print("|---|---|---|---|")
        for name, values in reads.items():
            q1, q2, q3 = statistics.quantiles([v * 1000 for v in values], n=4)
            print(f"| {name} | {q2:.1f} | {q1:.1f} | {q3:.1f} |")
        ratio = statistics.median(reads["ctxstore"]) / statistics.median(reads["ctxstore base"])
        print(f"\nctxstore / base, medians: {ratio:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.store == "pg":
            pg_drop(ORIGINAL)
            pg_drop(COPY)


if __name__ == "__main__":
    asyncio.run(main())
