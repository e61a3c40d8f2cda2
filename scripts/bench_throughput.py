"""Append throughput with one API process and with two, side by side (issue 14).

On a fresh PostgreSQL database per run (created and dropped here), starts
N API processes for N = 1 and then 2, creates 64 sessions, and has 8
concurrent clients append user/assistant nodes spread over those sessions.
The N processes are N ``uvicorn api.app:create_app --factory`` servers on
their own ports, the clients spread evenly over them, as a load balancer in
front of them would.  One more row runs ``uvicorn --workers 2`` on one port:
there the kernel hands each client's keep-alive connection to whichever
worker accepts first, and with only 8 long-lived connections one worker
often gets most of them, so that row varies from run to run.

Prints appends/s, p50 and p99 for each, the ratio of two processes to one
(the issue's target: >= 1.6x), the cores the whole machine kept busy in each
run (and so how far past one process any layout could go here), and then
checks that every acknowledged node is projected (the sessions' node counts)
and that a rebuild from the log is byte-identical to the live tables.

    python scripts/bench_throughput.py [--appends 2000] [--sessions 64] [--clients 8]
        [--partitions 8]
        [--admin postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_api import (  # noqa: E402  (after the path set-up above)
    Busy,
    Result,
    free_port,
    measure,
    start_server,
    stop_server,
    table,
    wait_healthy,
)

TARGET = 1.6


def create_database(admin: str) -> str:
    import psycopg

    name = f"ctxstore_tp_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin.rsplit("/", 1)[0] + "/" + name


def drop_database(admin: str, url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def drive(bases: list[str], sessions: int, appends: int,
                clients: int) -> tuple[Result, list[str]]:  # fmt: skip
    async with httpx.AsyncClient(base_url=bases[0], timeout=30) as client:
        sids = []
        for n in range(sessions):
            response = await client.post("/sessions", json={"title": f"tp {n}",
                                                            "model": "openai:gpt-4o"})  # fmt: skip
            response.raise_for_status()
            sids.append(response.json()["session_id"])

    def post(client: httpx.AsyncClient, i: int) -> Any:
        sid = sids[i % len(sids)]
        role = "user" if (i // len(sids)) % 2 == 0 else "assistant"
        field = "input" if role == "user" else "output"
        return client.post(f"/sessions/{sid}/nodes",
                           json={"role": role, field: f"throughput message {i}"})  # fmt: skip

    result = await measure(bases, "POST /sessions/{sid}/nodes", post, appends, clients)
    return result, sids


def projected(url: str, sids: list[str]) -> int:
    from service.runtime import Runtime

    runtime = Runtime(url, auto_compact=False)
    try:
        return sum(runtime.session_info(sid)["counts"]["nodes"] for sid in sids)
    finally:
        runtime.close()


def run(admin: str, servers: int, workers: int,
        args: argparse.Namespace) -> tuple[Result, bool, bool]:  # fmt: skip
    """``servers`` API servers of ``workers`` processes each, on one fresh database."""
    from projections.migrate import upgrade
    from projections.rebuild import rebuild_and_compare

    url = create_database(admin)
    try:
        upgrade(url)  # once, before the servers race to
        procs, bases = [], []
        try:
            for _ in range(servers):
                port = free_port()
                procs.append(start_server(url, port, workers))
                bases.append(f"http://127.0.0.1:{port}")
            for base, proc in zip(bases, procs, strict=True):
                wait_healthy(base, proc)
            with Busy() as busy:
                result, sids = asyncio.run(drive(bases, args.sessions, args.appends,
                                                 args.clients))  # fmt: skip
            result.busy = busy.cores
        finally:
            for proc in procs:
                stop_server(proc)
        complete = projected(url, sids) == result.ok
        identical = bool(rebuild_and_compare(url)["identical"])
        return result, complete, identical
    finally:
        drop_database(admin, url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=8,
                        help="CTXSTORE_PARTITIONS for the servers' fresh stores")  # fmt: skip
    parser.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    os.environ["CTXSTORE_PARTITIONS"] = str(args.partitions)  # the servers inherit it
    rows = []
    layouts = [(1, 1, "1 API process"), (2, 1, "2 API processes"),
               (1, 2, "uvicorn --workers 2")]  # fmt: skip
    for servers, workers, name in layouts:
        result, complete, identical = run(args.admin, servers, workers, args)
        result.name = f"{name}: append"
        rows.append((result, complete, identical))
    print(table([r for r, _, _ in rows]))
    for result, complete, identical in rows:
        print(
            f"{result.name}: every acknowledged node projected: {complete}; "
            f"rebuild identical: {identical}"
        )
    ratio = rows[1][0].rate / rows[0][0].rate
    shared = rows[2][0].rate / rows[0][0].rate
    print(
        f"\ntwo processes / one: {ratio:.2f}x (target >= {TARGET}x); "
        f"uvicorn --workers 2 / one: {shared:.2f}x"
    )
    cores = os.cpu_count() or 1
    print("\nCPU: cores busy on this machine (servers, database, clients) while appending:")
    for result, _, _ in rows:
        per = result.busy / result.rate * 1000
        print(
            f"  {result.name:<34} {result.busy:4.2f} of {cores} cores, {per:5.2f} ms CPU an append"
        )
    ceiling = cores / rows[0][0].busy
    print(
        f"With one process the run kept {rows[0][0].busy:.2f} cores busy: with the same CPU "
        f"an append, no layout can go past {ceiling:.2f}x of it on {cores} cores."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
