"""What an append over HTTP to a durable event log costs before any projection (issue 29).

Issue 29 asks that ctxstore's append over HTTP take at most twice the Agents
SDK's ``add_items()``, which runs in the client's process.  This script
times, turn by turn and in one loop (so the machine's speed moves them all
alike), the parts no HTTP event store can leave out, each against the SDK's
own append of the same turn:

- ``http``: the turn's ``POST /nodes/batch`` body sent to a bare Starlette
  app on the same ``uvicorn`` and flags (``scripts.http_floor``);
- ``event write``: the turn's nodes, one stored event each, written and
  committed through eventsourcing's stock recorder (SQLite in WAL mode, or
  PostgreSQL), uncompressed: the durable write before which nothing may be
  acknowledged;
- ``token count``: each node's text counted with the local tokenizer, which
  the occupancy record needs;

and ctxstore's own append over HTTP beside them.  Their sum is the floor; what
2x the SDK leaves above it is all an append may spend on parsing and checking
the body, the domain's rules, and projecting the commit.

    python -m scripts.append_floor [--store sqlite|pg] [--turns 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from eventsourcing.persistence import ApplicationRecorder, StoredEvent

from domain.store_config import eventsourcing_env
from domain.tokens import count_tokens
from scripts.coding_workload import ctx_nodes, workload
from scripts.http_floor import floor_server
from scripts.peer_probes import pg_create, pg_drop
from scripts.peer_systems import Ctx, Sdk, sdk_items

FLOOR_DB = "append_floor_events"
PARTS = ("SDK add_items()", "http", "event write", "token count", "ctxstore append (HTTP)")


def recorder(url: str) -> ApplicationRecorder:
    """eventsourcing's stock recorder on ``url`` (read as ctxstore reads a database URL,
    ``store_config.eventsourcing_env``), its table created."""
    env = eventsourcing_env(url)
    if env["PERSISTENCE_MODULE"] == "eventsourcing.sqlite":
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        rec: ApplicationRecorder = SQLiteApplicationRecorder(SQLiteDatastore(env["SQLITE_DBNAME"]))
    else:
        from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

        datastore = PostgresDatastore(env["POSTGRES_DBNAME"], env["POSTGRES_HOST"],
                                      env["POSTGRES_PORT"], env["POSTGRES_USER"],
                                      env["POSTGRES_PASSWORD"])  # fmt: skip
        rec = PostgresApplicationRecorder(datastore)
    rec.create_table()  # type: ignore[attr-defined]
    return rec


def write_events(rec: ApplicationRecorder, originator: uuid.UUID, version: int,
                 nodes: list[dict[str, Any]]) -> int:  # fmt: skip
    events = [StoredEvent(originator_id=originator, originator_version=version + k,
                          topic="NodeAppended", state=json.dumps(node).encode())
              for k, node in enumerate(nodes, start=1)]  # fmt: skip
    rec.insert_events(events)
    return version + len(nodes)


def count(nodes: list[dict[str, Any]]) -> int:
    return sum(count_tokens(json.dumps(node)) for node in nodes)


async def run(store: str, turns: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="append_floor_"))
    times: dict[str, list[float]] = {part: [] for part in PARTS}
    if store == "sqlite":
        sdk, ctx_url = Sdk(folder / "sdk.db", None), f"sqlite:///{folder / 'ctx.db'}"
        events_url = f"sqlite:///{folder / 'ev.db'}"
    else:
        sdk_url = pg_create("append_floor_sdk")[0]
        sdk = Sdk(None, sdk_url.replace("postgresql://", "postgresql+psycopg://"))
        ctx_url, events_url = pg_create("append_floor_ctx")[0], pg_create(FLOOR_DB)[0]
    rec = recorder(events_url)
    ctx = Ctx(ctx_url, 1)
    ctx.start()
    try:
        session = sdk.session("floor")
        with floor_server() as floor_url:
            async with httpx.AsyncClient(base_url=floor_url, timeout=60) as bare, \
                    ctx.client() as client:  # fmt: skip
                sid = await ctx.open(client, "floor")
                originator, version = uuid.uuid4(), 0
                for turn in workload(7, turns):
                    nodes = ctx_nodes(turn)
                    t0 = time.perf_counter()
                    await session.add_items(sdk_items(turn))
                    t1 = time.perf_counter()
                    (await bare.post("/x", json={"nodes": nodes})).raise_for_status()
                    t2 = time.perf_counter()
                    version = write_events(rec, originator, version, nodes)
                    t3 = time.perf_counter()
                    count(nodes)
                    t4 = time.perf_counter()
                    await ctx.append(client, sid, turn)
                    t5 = time.perf_counter()
                    for part, took in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4),
                                          strict=True):  # fmt: skip
                        times[part].append(took)
        if store == "sqlite":
            session.close()
    finally:
        ctx.stop()
        await sdk.close()
        if store == "pg":
            for name in (FLOOR_DB, "append_floor_sdk", "append_floor_ctx"):
                pg_drop(name)
    return {part: statistics.median(took) * 1000 for part, took in times.items()}


def table(store: str, p50: dict[str, float]) -> str:
    sdk = p50["SDK add_items()"]
    floor = p50["http"] + p50["event write"] + p50["token count"]
    rows = [f"| append p50 ({store}) | ms | / SDK |", "|---|---|---|"]
    rows += [f"| {part} | {ms:.2f} | {ms / sdk:.2f}x |" for part, ms in p50.items()]
    rows.append(f"| floor: http + event write + token count | {floor:.2f} | {floor / sdk:.2f}x |")
    left = 2 * sdk - floor
    rows.append(f"| left within 2x the SDK for the body's checks, the rules and the "
                f"projection | {left:.2f} | {left / sdk:.2f}x |")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args(argv)
    print(table(args.store, asyncio.run(run(args.store, args.turns))))


if __name__ == "__main__":
    main()
