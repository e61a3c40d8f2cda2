"""The systems ``bench_peers`` drives: ctxstore over HTTP, the Agents SDK's sessions, LangGraph.

Each takes a turn of the coding-agent workload (``scripts.coding_workload``)
as its own API wants it, and feeds what the model would be fed.  See
``scripts.bench_peers`` for what is measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from scripts.bench_api import free_port, stop_server, wait_healthy
from scripts.coding_workload import Turn, ctx_nodes

ROOT = Path(__file__).resolve().parent.parent
# ctxstore's history budget for openai:gpt-4o: the 128,000-token window less the output
# reserve, min(16,384, 12.5%) (domain/catalogue.py, domain/budget.py); LangGraph trims to it.
LG_HISTORY_TOKENS = 112_000

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
