"""Append throughput with one API process and with two, side by side (issue 14).

On a fresh PostgreSQL database per run (created and dropped here), starts
``uvicorn api.app:create_app --factory --workers N`` for N = 1 and then 2,
creates 64 sessions, and has 8 concurrent clients append user/assistant
nodes spread over those sessions.  Prints appends/s, p50 and p99 for each,
the ratio of two processes to one (the issue's target: >= 1.6x), and then
checks that every acknowledged node is projected (the sessions' node counts)
and that a rebuild from the log is byte-identical to the live tables.

    python scripts/bench_throughput.py [--appends 2000] [--sessions 64] [--clients 8]
        [--admin postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_api import (  # noqa: E402  (after the path set-up above)
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


async def drive(base: str, sessions: int, appends: int, clients: int) -> tuple[Result, list[str]]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
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

    result = await measure(base, "POST /sessions/{sid}/nodes", post, appends, clients)
    return result, sids


def projected(url: str, sids: list[str]) -> int:
    from service.runtime import Runtime

    runtime = Runtime(url, auto_compact=False)
    try:
        return sum(runtime.session_info(sid)["counts"]["nodes"] for sid in sids)
    finally:
        runtime.close()


def run(admin: str, workers: int, args: argparse.Namespace) -> tuple[Result, bool, bool]:
    from projections.rebuild import rebuild_and_compare

    url = create_database(admin)
    try:
        port = free_port()
        proc = start_server(url, port, workers)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_healthy(base, proc)
            result, sids = asyncio.run(drive(base, args.sessions, args.appends, args.clients))
        finally:
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
    parser.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    rows = []
    for workers in (1, 2):
        result, complete, identical = run(args.admin, workers, args)
        result.name = f"{workers} API process{'es' if workers > 1 else ''}: append"
        rows.append((result, complete, identical))
    print(table([r for r, _, _ in rows]))
    for result, complete, identical in rows:
        print(
            f"{result.name}: every acknowledged node projected: {complete}; "
            f"rebuild identical: {identical}"
        )
    ratio = rows[1][0].rate / rows[0][0].rate
    print(f"\ntwo processes / one: {ratio:.2f}x (target >= {TARGET}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
