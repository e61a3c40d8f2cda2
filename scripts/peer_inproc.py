"""ctxstore in the benchmark's own process: the throughput figure the SDK is measured on.

The SDK and LangGraph run in the client's process; ctxstore's table column
crosses HTTP.  Issue 29 asks for both: across HTTP, and in process (a
``service.runtime.Runtime`` opened here, as an embedding application would).
Each client's turn is an ``AppendNodes`` command then a render, run in a
worker thread (``asyncio.to_thread``), as the SDK runs its own SQLite calls.
"""

from __future__ import annotations

import asyncio
import time

from scripts.coding_workload import ctx_nodes, workload


async def inproc_throughput(url: str, clients: int, turns: int) -> float:
    """Turns a second: ``clients`` agents at once, each on its own session."""
    from domain import commands as c
    from service.runtime import Runtime

    runtime = await asyncio.to_thread(Runtime, url)

    async def agent(i: int) -> None:
        started = await asyncio.to_thread(runtime.execute, c.StartSession(title=f"tp-{i}"))
        sid = str(started[0] if isinstance(started, tuple) else started)
        for turn in workload(100 + i, turns):
            command = c.AppendNodes(session_id=sid, nodes=ctx_nodes(turn))
            await asyncio.to_thread(runtime.execute, command)
            await asyncio.to_thread(runtime.rendered, sid)

    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(agent(i) for i in range(clients)))
        return clients * turns / (time.perf_counter() - t0)
    finally:
        await asyncio.to_thread(runtime.close)
