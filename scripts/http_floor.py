"""What any HTTP service pays before doing anything: the floor under ctxstore's figures.

``bench_peers`` compares ctxstore across HTTP with the Agents SDK's session in
the client's own process.  Here the same ``uvicorn`` (one worker, same flags)
serves a bare Starlette app whose one route reads the body and answers a
small JSON object, and the same client sends it each turn's ``POST`` body
(the ``/nodes/batch`` JSON) and a ``GET``: the round trip no HTTP store can
go under, to read an append or a cold-read ratio against.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from scripts.bench_api import free_port, stop_server, wait_healthy
from scripts.coding_workload import ctx_nodes, workload
from scripts.peer_systems import ROOT


async def _echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"ok": True, "bytes": len(body)})


app = Starlette(routes=[Route("/health", _echo), Route("/x", _echo, methods=["GET", "POST"])])


@contextmanager
def floor_server() -> Iterator[str]:
    """The bare app on the same ``uvicorn`` and flags as ctxstore's server; yields its URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", "scripts.http_floor:app", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(proc)


async def floor_figures(turns: int) -> tuple[float, float]:
    """p50 seconds of a ``POST`` of each turn's body and of a ``GET``, over ``turns`` turns."""
    posts: list[float] = []
    gets: list[float] = []
    with floor_server() as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            for turn in workload(0, turns):
                t0 = time.perf_counter()
                (await client.post("/x", json={"nodes": ctx_nodes(turn)})).raise_for_status()
                t1 = time.perf_counter()
                (await client.get("/x")).raise_for_status()
                posts.append(t1 - t0)
                gets.append(time.perf_counter() - t1)
    return sorted(posts)[len(posts) // 2], sorted(gets)[len(gets) // 2]
