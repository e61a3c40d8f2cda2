"""ctxstore beside the OpenAI Agents SDK's sessions and LangGraph, on one coding-agent workload.

A user choosing where to keep an agent's history compares ctxstore with what
they already have (issue 29).  This drives, turn by turn and interleaved in
one run, the same deterministic workload through

* ctxstore over HTTP (a real ``uvicorn`` server on SQLite, or PostgreSQL with
  ``--store pg``): a turn is one ``POST /nodes/batch``, the feed one
  ``GET /render``;
* the SDK's ``SQLiteSession`` (``SQLAlchemySession`` on the same PostgreSQL
  server with ``--store pg``): a turn is one ``add_items``, the feed one
  ``get_items()``;
* LangGraph with ``trim_messages``: a ``StateGraph`` of ``MessagesState`` with
  one node, on ``AsyncSqliteSaver`` (``AsyncPostgresSaver`` with ``--store pg``),
  in this process: a turn is one ``ainvoke`` with the turn's messages (the
  ``add_messages`` reducer appends them to the thread), the feed the thread's
  state messages (``aget_state``) trimmed to ``LG_HISTORY_TOKENS`` = 112,000
  tokens, ctxstore's history budget for a session of ``openai:gpt-4o`` (its
  128,000-token window less the output reserve), with ``strategy="last"``,
  ``start_on="human"``, ``include_system=True`` and LangChain's cheap
  ``count_tokens_approximately`` (a tokenizer would be counted again over
  the whole history at every feed);

and prints side by side: append p50, feed p50 and p99 at the last tenth of the
turns, throughput with 8 clients on distinct sessions, storage per 1,000 turns
and the cold first read after start, with the ratios ctxstore / SDK and
ctxstore / LangGraph.  Then (not with ``--no-memory``) the peak memory of a
fresh process serving one session's read on the store as built, and again
after the store was made ``--mem-scale`` (4) times as large: ctxstore's server
after one render, the SDK's process after one ``get_items()``.

The workload (``workload``): 300 turns a session; a user message every 10th
turn; each turn an assistant text and 1-3 tool calls whose results are
0.2-20 kB (log-uniform), a third of them re-reads of a file read before.

    python -m scripts.bench_peers [--store sqlite|pg] [--quick] [--turns 300] [--no-memory]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts.coding_workload import workload
from scripts.http_floor import floor_figures
from scripts.peer_inproc import inproc_throughput
from scripts.peer_probes import (
    ctx_cold,
    ctx_memory,
    enlarge,
    lg_cold,
    pg_bytes,
    pg_create,
    pg_drop,
    sdk_cold,
    sqlite_bytes,
)
from scripts.peer_systems import ROOT, Ctx, Lg, Sdk, sdk_items

_shared_tiktoken = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared_tiktoken.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared_tiktoken)


# -- measuring ------------------------------------------------------------------------------


# Rounds of fresh starts, every system once a round, each first in as many rounds as the
# others: the cold figure is the median of their first reads.  Five starts left the
# ratio swinging between 2.0x and 2.5x from one run to the next on the same code.
COLD_ROUNDS = 3
COLD_SETTLE = 1.0  # seconds of quiet before each fresh start


def cold_starts(systems: int) -> int:
    """Fresh starts of each system: ``COLD_ROUNDS``, each of the systems first as often."""
    return COLD_ROUNDS * systems


@dataclass
class Figures:
    append: list[float] = field(default_factory=list)
    feed_late: list[float] = field(default_factory=list)
    turn_late: list[float] = field(default_factory=list)  # append + feed, the same turn
    turns: int = 0
    throughput: float = 0.0
    storage: float = 0.0
    cold: float = 0.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def latency(ctxs: dict[str, Ctx], sdk: Sdk, lg: Lg, sessions: int, turns: int,
                  figs: dict[str, Figures]) -> dict[str, list[str]]:  # fmt: skip
    """Each session's turns, the systems interleaved turn by turn (the first one rotating)."""
    late = turns - max(1, turns // 10)
    systems = [*ctxs, "sdk", "lg"]
    clients = {name: ctx.client() for name, ctx in ctxs.items()}
    sids: dict[str, list[str]] = {name: [] for name in systems}
    try:
        for s in range(sessions):
            name = f"bench-{s}"
            for system, ctx in ctxs.items():
                sids[system].append(await ctx.open(clients[system], name))
            sids["sdk"].append(name)
            sids["lg"].append(name)
            sdk_session = sdk.session(name)
            for t, turn in enumerate(workload(s, turns)):
                order = systems[t % len(systems) :] + systems[: t % len(systems)]
                for system in order:
                    t0 = time.perf_counter()
                    if system == "sdk":
                        await sdk_session.add_items(sdk_items(turn))
                        t1 = time.perf_counter()
                        await sdk_session.get_items()
                    elif system == "lg":
                        await lg.append(name, turn)
                        t1 = time.perf_counter()
                        await lg.feed(name)
                    else:
                        sid, client = sids[system][-1], clients[system]
                        await ctxs[system].append(client, sid, turn)
                        t1 = time.perf_counter()
                        await ctxs[system].feed(client, sid)
                    t2 = time.perf_counter()
                    figs[system].append.append(t1 - t0)
                    if t >= late:
                        figs[system].feed_late.append(t2 - t1)
                        figs[system].turn_late.append(t2 - t0)
                    figs[system].turns += 1
            if sdk.pg_url is None:
                sdk_session.close()
    finally:
        for client in clients.values():
            await client.aclose()
    return sids


async def throughput(ctxs: dict[str, Ctx], sdk: Sdk, lg: Lg, clients: int, turns: int,
                     figs: dict[str, Figures]) -> None:  # fmt: skip
    """``clients`` agents at once, each on its own session, each turn an append then a feed;
    one system at a time."""

    async def ctx_agent(ctx: Ctx, i: int) -> None:
        async with ctx.client() as client:
            sid = await ctx.open(client, f"tp-{i}")
            for turn in workload(100 + i, turns):
                await ctx.append(client, sid, turn)
                await ctx.feed(client, sid)

    async def sdk_agent(i: int) -> None:
        session = sdk.session(f"tp-{i}")
        for turn in workload(100 + i, turns):
            await session.add_items(sdk_items(turn))
            await session.get_items()
        if sdk.pg_url is None:
            session.close()

    async def lg_agent(i: int) -> None:
        for turn in workload(100 + i, turns):
            await lg.append(f"tp-{i}", turn)
            await lg.feed(f"tp-{i}")

    for system in [*ctxs, "sdk", "lg"]:
        t0 = time.perf_counter()
        if system == "sdk":
            await asyncio.gather(*(sdk_agent(i) for i in range(clients)))
        elif system == "lg":
            await asyncio.gather(*(lg_agent(i) for i in range(clients)))
        else:
            await asyncio.gather(*(ctx_agent(ctxs[system], i) for i in range(clients)))
        figs[system].throughput = clients * turns / (time.perf_counter() - t0)


# -- the run --------------------------------------------------------------------------------


def names(store: str) -> dict[str, str]:
    sdk = "SDK SQLiteSession" if store == "sqlite" else "SDK SQLAlchemySession"
    lg = "LangGraph SqliteSaver" if store == "sqlite" else "LangGraph PostgresSaver"
    return {"ctx": "ctxstore (HTTP)", "base": "ctxstore base (HTTP)", "sdk": sdk, "lg": lg}


def ratio(value: float) -> str:
    """Two decimals, three below 0.1 (LangGraph's storage is hundreds of times ctxstore's)."""
    return f"{value:.3f}x" if abs(value) < 0.1 else f"{value:.2f}x"


def table(figs: dict[str, Figures], store: str) -> str:
    label = names(store)
    ctxs = [name for name in figs if name not in ("sdk", "lg")]
    pairs = [(name, peer) for peer in ("sdk", "lg") for name in ctxs]
    ms = 1000.0

    def row(title: str, get: Any) -> str:
        values = {name: get(f) for name, f in figs.items()}
        ratios = [ratio(values[name] / values[peer]) for name, peer in pairs]
        return "| " + " | ".join([title, *(f"{v:.2f}" for v in values.values()), *ratios]) + " |"

    short = {"sdk": "SDK", "lg": "LangGraph"}
    head = [f"figure ({store})", *(label[name] for name in figs),
            *(f"{label[name].split(' (')[0]} / {short[peer]}" for name, peer in pairs)]  # fmt: skip
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out.append(row("append p50 (ms)", lambda f: pct(f.append, 0.5) * ms))
    out.append(row("feed p50, last tenth of turns (ms)", lambda f: pct(f.feed_late, 0.5) * ms))
    out.append(row("feed p99, last tenth of turns (ms)", lambda f: pct(f.feed_late, 0.99) * ms))
    out.append(row("whole turn (append + feed) p50, last tenth (ms)",
                   lambda f: pct(f.turn_late, 0.5) * ms))  # fmt: skip
    out.append(row("throughput, 8 clients (turns/s)", lambda f: f.throughput))
    out.append(row("storage per 1,000 turns (MB)", lambda f: f.storage))
    cold = f"cold first read after start, median of {cold_starts(len(figs))} (ms)"
    out.append(row(cold, lambda f: f.cold * ms))
    return "\n".join(out)


def memory_table(rss: dict[str, tuple[float, float]], store: str, turns: int, scale: int) -> str:
    """Peak RSS (MB) of a fresh process serving one session's read: the store as built and
    ``scale`` times as large."""
    label = names(store)
    head = ["fresh process, one session read: peak RSS (MB)", f"{turns:,} turns stored",
            f"{turns * scale:,} turns stored ({scale}x)", f"{scale}x / 1x"]  # fmt: skip
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, (small, large) in rss.items():
        out.append(f"| {label[name]} | {small:.1f} | {large:.1f} | {large / small:.2f}x |")
    return "\n".join(out)


async def run(args: argparse.Namespace) -> str:
    folder = Path(tempfile.mkdtemp(prefix="bench_peers_"))
    roots = {"ctx": ROOT, **({"base": Path(args.base_tree)} if args.base_tree else {})}
    figs = {name: Figures() for name in [*roots, "sdk", "lg"]}
    dbs: dict[str, str] = {}
    base: dict[str, int] = {}
    ctxs: dict[str, Ctx] = {}
    sdk, lg = Sdk(folder / "sdk.db", None), Lg(folder / "lg.db", None)
    try:
        if args.store == "sqlite":
            urls = {name: f"sqlite:///{folder / name}.db" for name in roots}
        else:
            tag = f"bench_peers_{os.getpid()}"
            urls = {}
            for name in figs:
                dbs[name] = f"{tag}_{name}"
                urls[name], base[name] = pg_create(dbs[name])
            sdk = Sdk(None, urls.pop("sdk").replace("postgresql://", "postgresql+psycopg://"))
            lg = Lg(None, urls.pop("lg"))
        for name, root in roots.items():
            ctxs[name] = Ctx(urls[name], args.workers, root)
            ctxs[name].start()
        await lg.open()
        sids = await latency(ctxs, sdk, lg, args.sessions, args.turns, figs)
        turns = args.sessions * args.turns
        await sdk.close()
        await lg.close()
        for ctx in ctxs.values():
            ctx.stop()
        for name, f in figs.items():
            if args.store == "sqlite":
                size = sqlite_bytes(folder / f"{name}.db")
            else:
                size = pg_bytes(dbs[name]) - base[name]
            f.storage = size / turns * 1000 / 1e6
        colds: dict[str, list[float]] = {name: [] for name in figs}
        for ctx in ctxs.values():
            ctx.stop()
        systems = ["sdk", "lg", *ctxs]
        for start in range(cold_starts(len(systems))):  # one sample each: their median
            # in turn, each system first in some rounds: whatever the start just before
            # leaves running (a process exiting) must not always slow the same one
            for name in systems[start % len(systems) :] + systems[: start % len(systems)]:
                time.sleep(COLD_SETTLE)  # what the last one left (its exit, its writes) settles
                if name == "sdk":
                    colds[name].append(sdk_cold(sdk, sids[name][0])[0])
                elif name == "lg":
                    colds[name].append(lg_cold(lg, sids[name][0]))
                else:
                    colds[name].append(await ctx_cold(ctxs[name], sids[name][0]))
                    ctxs[name].stop()
        for name, values in colds.items():
            figs[name].cold = pct(values, 0.5)
        for ctx in ctxs.values():
            ctx.start()
        await lg.open()
        await throughput(ctxs, sdk, lg, args.clients, args.tp_turns, figs)
        if args.store == "sqlite":
            inproc_url = f"sqlite:///{folder / 'inproc'}.db"
        else:
            dbs["inproc"] = f"bench_peers_{os.getpid()}_inproc"
            inproc_url = pg_create(dbs["inproc"])[0]
        inproc = await inproc_throughput(inproc_url, args.clients, args.tp_turns)
        await sdk.close()
        await lg.close()
        out = table(figs, args.store)
        out += (
            f"\n\nThroughput in process (scripts/peer_inproc.py: ctxstore's Runtime in this "
            f"process, {args.clients} clients, as the SDK runs): {inproc:.2f} turns/s, "
            f"{ratio(inproc / figs['sdk'].throughput)} the SDK's"
        )
        post, get = await floor_figures(args.turns)
        sdk_append = pct(figs["sdk"].append, 0.5)
        out += (
            f"\n\nHTTP floor, back to back (scripts/http_floor.py: a bare Starlette app on the "
            f"same uvicorn, the same client; interleaved as above, scripts/append_floor.py): "
            f"POST of a turn's body p50 {post * 1000:.2f} ms "
            f"({ratio(post / sdk_append)} the SDK's append), GET p50 {get * 1000:.2f} ms"
        )
        if not args.no_memory:
            for ctx in ctxs.values():
                ctx.stop()
            stored = turns + args.clients * args.tp_turns
            small = {name: await ctx_memory(ctx, sids[name][0]) for name, ctx in ctxs.items()}
            small["sdk"] = sdk_cold(sdk, sids["sdk"][0])[1]
            await enlarge(ctxs, sdk, (args.mem_scale - 1) * stored, args.turns, args.clients)
            large = {name: await ctx_memory(ctx, sids[name][0]) for name, ctx in ctxs.items()}
            large["sdk"] = sdk_cold(sdk, sids["sdk"][0])[1]
            rss = {name: (small[name], large[name]) for name in small}
            out += "\n\n" + memory_table(rss, args.store, stored, args.mem_scale)
    finally:
        for ctx in ctxs.values():
            ctx.stop()
        await sdk.close()
        await lg.close()
        shutil.rmtree(folder, ignore_errors=True)
        for name in dbs.values():
            pg_drop(name)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--sessions", type=int, default=3, help="sessions timed turn by turn")
    parser.add_argument("--turns", type=int, default=300, help="turns a session")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--tp-turns", type=int, default=40, help="turns each throughput client")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers")
    parser.add_argument(
        "--base-tree",
        help="also serve ctxstore from this source tree (a "
        "baseline, e.g. `git archive <commit> | tar -x -C DIR`)",
    )
    parser.add_argument("--quick", action="store_true", help="1 session of 60 turns")
    parser.add_argument("--mem-scale", type=int, default=4,
                        help="the memory figure's larger store, times the built one")  # fmt: skip
    parser.add_argument("--no-memory", action="store_true", help="skip the memory figure")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.turns, args.tp_turns = 1, 60, 10
    print(f"# bench_peers: {args.sessions} x {args.turns} turns, {args.clients} clients x "
          f"{args.tp_turns} turns, store {args.store}")  # fmt: skip
    print(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
