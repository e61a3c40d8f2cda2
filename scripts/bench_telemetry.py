"""What metrics and JSON logs cost an append and a render: on and off, side by side, one run.

Two apps in this process, each over its own SQLite store holding the same
session (``scripts.bench_api.build_session``): one with the telemetry off
(``CTXSTORE_METRICS=off``, plain logs: the middleware passes requests
through), one with metrics on and JSON-lines access logs (written to
/dev/null: the cost of making the line, not of the disk).  Requests go
through the whole ASGI stack (``httpx.ASGITransport``, no sockets) and
alternate between the two, which goes first swapping each round, so the
machine's other load falls on both alike.  Prints p50 and p99 of each and
the p50's overhead.

    python -m scripts.bench_telemetry [--nodes 300] [--requests 400] [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_shared_tiktoken = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared_tiktoken.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared_tiktoken)


def _quiet_json_logs() -> None:
    """JSON lines as configured for a server, written to /dev/null."""
    from telemetry import logs

    logs.configure_json()
    sink = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    logs._STREAM[0] = sink
    for name in ("ctxstore", *logs.UVICORN):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sink)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def drive(apps: dict[str, Any], sids: dict[str, str], requests: int,
                control: bool = False) -> dict[tuple[str, str], list[float]]:  # fmt: skip
    import httpx

    from telemetry import probes

    clients = {mode: httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                       base_url="http://localhost")  # fmt: skip
               for mode, app in apps.items()}  # fmt: skip
    out: dict[tuple[str, str], list[float]] = {}
    order = list(apps)
    try:
        for i in range(requests):
            order.reverse()
            for mode in order:
                probes.set_enabled(mode == "on" and not control)
                client, sid = clients[mode], sids[mode]
                start = time.perf_counter()
                r = await client.post(f"/sessions/{sid}/nodes",
                                      json={"role": "user", "input": f"step {i}"})  # fmt: skip
                out.setdefault(("append", mode), []).append(time.perf_counter() - start)
                assert r.status_code == 201, r.text
                start = time.perf_counter()
                r = await client.get(f"/sessions/{sid}/render")
                out.setdefault(("render", mode), []).append(time.perf_counter() - start)
                assert r.status_code == 200, r.text
    finally:
        for client in clients.values():
            await client.aclose()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument(
        "--control",
        action="store_true",
        help="both sides off: how far apart two equal sides land (noise)",
    )
    args = parser.parse_args(argv)

    from api.app import create_app
    from api.routes_ops import Operations
    from scripts.bench_api import build_session
    from service.runtime import Runtime

    folder = tempfile.mkdtemp(prefix="ctxstore-bench-telemetry-")
    runtimes: list[Any] = []
    try:
        apps, sids = {}, {}
        for mode in ("off", "on"):
            url = f"sqlite:///{folder}/{mode}.db"
            sids[mode] = build_session(url, args.nodes)
            runtime = Runtime(url)
            runtimes.append(runtime)
            logs = mode == "on" and not args.control
            apps[mode] = create_app(runtime, ops=Operations(json_logs=logs))
        _quiet_json_logs()
        asyncio.run(drive(apps, sids, 20))  # warm both: caches, first imports
        times = asyncio.run(drive(apps, sids, args.requests, args.control))
    finally:
        for runtime in runtimes:
            runtime.close()
        shutil.rmtree(folder, ignore_errors=True)
    what = "off vs off (--control)" if args.control else "off vs metrics + JSON logs on"
    print(f"{args.requests} appends and renders each, alternating; session of {args.nodes} "
          f"nodes; telemetry {what} (ms)")  # fmt: skip
    print(f"{'':8} {'off p50':>8} {'on p50':>8} {'off p99':>8} {'on p99':>8} {'p50 cost':>9}")
    for op in ("append", "render"):
        off, on = times[(op, "off")], times[(op, "on")]
        p50_off, p50_on = statistics.median(off) * 1000, statistics.median(on) * 1000
        print(f"{op:8} {p50_off:8.2f} {p50_on:8.2f} {pct(off, 0.99) * 1000:8.2f} "
              f"{pct(on, 0.99) * 1000:8.2f} {100 * (p50_on / p50_off - 1):+8.1f}%")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
