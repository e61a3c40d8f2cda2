"""Benchmark the HTTP API on a 1,000-node session.

Builds the session in a temporary SQLite store, starts
``uvicorn api.app:create_app --factory --workers 2`` on a free loopback port,
then drives a bounded number of requests from a few concurrent httpx
clients against

* ``GET  /sessions/{sid}/render`` (the head commit, the hot read path), and
* ``POST /sessions/{sid}/nodes``  (an append: command + projection catch-up),

and prints requests/s, p50 and p99 latency.  The target is p99 < 20 ms for
the GET.  The server is stopped (and the store deleted) before exiting.

    python -m scripts.bench_api [--nodes 1000] [--requests 2000] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
# This tree's code, not whatever is installed: the server below gets the same
# through PYTHONPATH, so the session it serves is built by the code it runs.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
GET_P99_TARGET_MS = 20.0

# The tokenizer files cannot be downloaded here: use the shared copy, as the tests do.
_shared_tiktoken = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared_tiktoken.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared_tiktoken)


def build_session(url: str, nodes: int) -> str:
    """A session of ``nodes`` nodes: user, assistant, tool, assistant, ..."""
    from service.runtime import Runtime

    runtime = Runtime(url)
    try:
        session_id, _ = runtime.execute("start_session", title="bench", model="openai:gpt-4o")
        sid = str(session_id)
        for i in range(nodes):
            kind = i % 4
            if kind == 0:
                body: dict[str, Any] = {"role": "user", "input": f"Question {i}: what next?"}
            elif kind == 1:
                body = {"role": "assistant", "output": f"Let me look at file {i}."}
            elif kind == 2:
                body = {"role": "tool", "name": "read_file", "input": {"path": f"src/f{i}.py"},
                        "output": f"def f{i}():\n    return {i}\n"}  # fmt: skip
            else:
                body = {"role": "assistant", "output": f"File {i} returns {i}. Next."}
            runtime.execute("append_node", sid, **body)
        return sid
    finally:
        runtime.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(url: str, port: int, workers: int, **extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, CTXSTORE_DATABASE_URL=url, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory",
           "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
           "--log-level", "warning", "--no-access-log"]  # fmt: skip
    return subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)


def wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=base, timeout=5) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited with {proc.returncode}")
            try:
                if client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise RuntimeError("the server did not become healthy in time")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # uvicorn's supervisor stops its workers
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own process group, started above
        proc.wait(timeout=10)


def cpu_times() -> tuple[float, float]:
    """(busy, all) jiffies of the whole machine since boot, from ``/proc/stat`` (Linux)."""
    try:
        fields = [float(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except OSError:
        return math.nan, math.nan
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


class Busy:
    """How many of the machine's cores were busy during a run: servers, database,
    clients, everything on this machine (what bounds any speed-up from more processes)."""

    def __enter__(self) -> Busy:
        self.start = cpu_times()
        return self

    def __exit__(self, *_: object) -> None:
        busy, total = cpu_times()
        cores = os.cpu_count() or 1
        self.cores = (busy - self.start[0]) / (total - self.start[1]) * cores


@dataclass
class Result:
    name: str
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0
    busy: float = math.nan  # cores busy meanwhile (bench_throughput)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return math.nan
        return ordered[max(0, math.ceil(p * len(ordered)) - 1)] * 1000

    @property
    def ok(self) -> int:
        return sum(n for status, n in self.statuses.items() if 200 <= status < 300)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else math.nan


def _error_code(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return f"http_{response.status_code}"


Request = Callable[[httpx.AsyncClient, int], Any]


async def measure(base: str | list[str], name: str, make: Request, total: int,
                  concurrency: int) -> Result:  # fmt: skip
    """``total`` requests spread over ``concurrency`` clients, each with its own pool
    (and, given several servers' ``base`` URLs, client k talking to server k mod n)."""
    result = Result(name)
    counter = iter(range(total))
    bases = [base] if isinstance(base, str) else base

    async def worker(k: int) -> None:
        async with httpx.AsyncClient(base_url=bases[k % len(bases)], timeout=30) as client:
            for i in counter:
                started = time.perf_counter()
                response = await make(client, i)
                result.latencies.append(time.perf_counter() - started)
                result.statuses[response.status_code] += 1
                if response.status_code >= 300:
                    result.codes[_error_code(response)] += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    result.elapsed = time.perf_counter() - started
    return result


def table(results: list[Result]) -> str:
    head = f"{'endpoint':<34} {'requests':>8} {'ok':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}"
    rows = [head, "-" * len(head)]
    for r in results:
        rows.append(f"{r.name:<34} {len(r.latencies):>8} {r.ok:>6} {r.rate:>8.0f} "
                    f"{r.percentile(0.50):>8.2f} {r.percentile(0.99):>8.2f}")  # fmt: skip
        if r.codes:
            rows.append(f"{'':<34} refused: {dict(sorted(r.codes.items()))}")
    return "\n".join(rows)


async def run_benchmark(base: str, sid: str, requests: int, concurrency: int) -> list[Result]:
    render = f"/sessions/{sid}/render"
    nodes = f"/sessions/{sid}/nodes"

    def get(client: httpx.AsyncClient, i: int) -> Any:
        return client.get(render)

    def post(client: httpx.AsyncClient, i: int) -> Any:
        role = "user" if i % 2 == 0 else "assistant"
        return client.post(nodes, json={"role": role, "output": f"bench message {i}"})

    # Warm each worker's caches (several connections, so both workers get some).
    await measure(base, "warm-up", get, 8 * concurrency, concurrency)
    return [
        await measure(base, "GET  /sessions/{sid}/render", get, requests, concurrency),
        await measure(base, "POST /sessions/{sid}/nodes", post, requests, concurrency),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=2000, help="per endpoint")
    parser.add_argument("--concurrency", type=int, default=4, help="concurrent httpx clients")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the GET p99 misses the target")  # fmt: skip
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="ctxstore-bench-"))
    url = f"sqlite:///{workdir / 'bench.db'}"
    proc: subprocess.Popen[bytes] | None = None
    try:
        t0 = time.perf_counter()
        sid = build_session(url, args.nodes)
        print(f"built a {args.nodes}-node session in {time.perf_counter() - t0:.1f} s ({url})")
        port = free_port()
        proc = start_server(url, port, args.workers)
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, proc)
        print(f"uvicorn --workers {args.workers} on {base}; {args.requests} requests per "
              f"endpoint from {args.concurrency} concurrent clients\n")  # fmt: skip
        results = asyncio.run(run_benchmark(base, sid, args.requests, args.concurrency))
    finally:
        if proc is not None:
            stop_server(proc)
        shutil.rmtree(workdir, ignore_errors=True)

    print(table(results))
    p99 = results[0].percentile(0.99)
    verdict = "meets" if p99 < GET_P99_TARGET_MS else "MISSES"
    print(f"\nGET render p99 {p99:.2f} ms {verdict} the target of {GET_P99_TARGET_MS:.0f} ms")
    return 1 if args.check and p99 >= GET_P99_TARGET_MS else 0


if __name__ == "__main__":
    raise SystemExit(main())
