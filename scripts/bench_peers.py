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
import contextlib
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from scripts.bench_api import free_port, stop_server, wait_healthy
from scripts.coding_workload import Turn, ctx_nodes, workload

ROOT = Path(__file__).resolve().parent.parent
# ctxstore's history budget for openai:gpt-4o: the 128,000-token window less the output
# reserve, min(16,384, 12.5%) (domain/catalogue.py, domain/budget.py); LangGraph trims to it.
LG_HISTORY_TOKENS = 112_000
PG_ADMIN = os.environ.get("CTXSTORE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
_shared_tiktoken = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared_tiktoken.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared_tiktoken)


# -- the workload (scripts/coding_workload.py) ------------------------------------------


def sdk_items(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.user is not None:
        items.append({"role": "user", "content": turn.user})
    items.append({"role": "assistant", "content": turn.assistant})
    for tool in turn.tools:
        items.append({"type": "function_call", "call_id": tool.call_id, "name": tool.name,
                      "arguments": json.dumps(tool.args)})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": tool.call_id,
                      "output": tool.result})  # fmt: skip
    return items


def lg_messages(turn: Turn) -> list[Any]:
    """A turn as LangChain messages: the user's, the assistant's with its tool calls, the
    tool results."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

    messages: list[BaseMessage] = []
    if turn.user is not None:
        messages.append(HumanMessage(turn.user))
    calls = [
        {"name": t.name, "args": t.args, "id": t.call_id, "type": "tool_call"} for t in turn.tools
    ]
    messages.append(AIMessage(turn.assistant, tool_calls=calls))
    for tool in turn.tools:
        messages.append(ToolMessage(tool.result, tool_call_id=tool.call_id, name=tool.name))
    return messages


# -- the systems ----------------------------------------------------------------------------


class Ctx:
    """ctxstore over HTTP: one uvicorn process (one worker) serving the store."""

    def __init__(self, url: str, workers: int, root: Path = ROOT) -> None:
        self.url, self.workers, self.root = url, workers, root
        self.env = dict(os.environ, CTXSTORE_DATABASE_URL=url, PYTHONPATH=str(root))
        # The schema, by the tree that serves it, before its server opens the store.
        schema = "import os, service.runtime as r; r.Runtime(os.environ['U']).close()"
        subprocess.run([sys.executable, "-c", schema], check=True, cwd=root,
                       env=dict(self.env, U=url))  # fmt: skip
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory",
               "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers),
               "--log-level", "warning", "--no-access-log"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=self.env, start_new_session=True)
        wait_healthy(self.base, self.proc)

    def stop(self) -> None:
        if self.proc is not None:
            stop_server(self.proc)
            self.proc = None

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base, timeout=120)

    async def open(self, client: httpx.AsyncClient, name: str) -> str:
        reply = await client.post("/sessions", json={"title": name})
        reply.raise_for_status()
        return str(reply.json()["session_id"])

    async def append(self, client: httpx.AsyncClient, sid: str, turn: Turn) -> None:
        reply = await client.post(f"/sessions/{sid}/nodes/batch", json={"nodes": ctx_nodes(turn)})
        reply.raise_for_status()

    async def feed(self, client: httpx.AsyncClient, sid: str) -> int:
        reply = await client.get(f"/sessions/{sid}/render")
        reply.raise_for_status()
        return len(reply.content)


class Sdk:
    """The Agents SDK's own session, in this process: SQLite file, or SQLAlchemy on PG."""

    def __init__(self, path: Path | None, pg_url: str | None) -> None:
        self.path, self.pg_url = path, pg_url
        self.engine: Any = None

    def session(self, name: str) -> Any:
        if self.pg_url is None:
            from agents import SQLiteSession

            return SQLiteSession(name, str(self.path))
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        if self.engine is None:
            self.engine = create_async_engine(self.pg_url, pool_size=10)
        return SQLAlchemySession(name, engine=self.engine, create_tables=True)

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.dispose()
            self.engine = None


class Lg:
    """LangGraph in this process: one ``MessagesState`` graph on ``AsyncSqliteSaver`` (a file
    of its own), or ``AsyncPostgresSaver`` on a pool (a database of its own)."""

    def __init__(self, path: Path | None, pg_url: str | None) -> None:
        self.path, self.pg_url = path, pg_url
        self.stack = contextlib.AsyncExitStack()
        self.graph: Any = None

    async def open(self) -> None:
        from langgraph.graph import START, MessagesState, StateGraph

        saver: Any
        if self.pg_url is None:
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            saver = await self.stack.enter_async_context(
                AsyncSqliteSaver.from_conn_string(str(self.path))
            )
        else:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
            pool: Any = AsyncConnectionPool(self.pg_url, max_size=10, kwargs=kwargs, open=False)
            await pool.open(wait=True)
            self.stack.push_async_callback(pool.close)
            saver = AsyncPostgresSaver(pool)
        await saver.setup()

        def turn(state: MessagesState) -> dict[str, Any]:
            return {}  # the turn's messages came in with the input, through add_messages

        self.graph = (
            StateGraph(MessagesState)
            .add_node("turn", turn)
            .add_edge(START, "turn")
            .compile(checkpointer=saver)
        )

    @staticmethod
    def config(thread: str) -> Any:
        return {"configurable": {"thread_id": thread}}

    async def append(self, thread: str, turn: Turn) -> None:
        await self.graph.ainvoke({"messages": lg_messages(turn)}, self.config(thread))

    async def feed(self, thread: str) -> int:
        from langchain_core.messages import trim_messages
        from langchain_core.messages.utils import count_tokens_approximately

        state = await self.graph.aget_state(self.config(thread))
        kept = trim_messages(state.values.get("messages", []), max_tokens=LG_HISTORY_TOKENS,
                             strategy="last", token_counter=count_tokens_approximately,
                             start_on="human", include_system=True)  # fmt: skip
        return len(kept)

    async def close(self) -> None:
        await self.stack.aclose()
        self.stack, self.graph = contextlib.AsyncExitStack(), None


# -- measuring ------------------------------------------------------------------------------


@dataclass
class Figures:
    append: list[float] = field(default_factory=list)
    feed_late: list[float] = field(default_factory=list)
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
from scripts.bench_peers import Lg
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
    out.append(row("throughput, 8 clients (turns/s)", lambda f: f.throughput))
    out.append(row("storage per 1,000 turns (MB)", lambda f: f.storage))
    out.append(row("cold first read after start (ms)", lambda f: f.cold * ms))
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
        figs["sdk"].cold = sdk_cold(sdk, sids["sdk"][0])[0]
        figs["lg"].cold = lg_cold(lg, sids["lg"][0])
        for name, ctx in ctxs.items():
            figs[name].cold = await ctx_cold(ctx, sids[name][0])
        await lg.open()
        await throughput(ctxs, sdk, lg, args.clients, args.tp_turns, figs)
        await sdk.close()
        await lg.close()
        out = table(figs, args.store)
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
