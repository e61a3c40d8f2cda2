"""``ctxstore serve`` as a real process: metrics summed over workers, JSON logs without content."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import ROOT, _free_port, wait_until_up
from tests.api.test_metrics import parse, value
from tests.conftest import IMMEDIATE_POLICY_JSON

MARKER = "zq-content-marker-5521"


@contextmanager
def served(store_url: str, folder: Path, workers: int = 1, **env: str) -> Iterator[str]:
    """``ctxstore serve`` on a free loopback port, its output in ``folder``; its base URL."""
    port = _free_port()
    full = dict(os.environ, PYTHONPATH=str(ROOT), CTXSTORE_POLICY=IMMEDIATE_POLICY_JSON, **env)
    full.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with open(folder / "out.log", "wb") as out, open(folder / "err.log", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.cli", "serve", "--db", store_url,
             "--port", str(port), "--workers", str(workers)],
            cwd=ROOT, env=full, stdout=out, stderr=err,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(proc, base, "/ready", seconds=90)
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def test_two_workers_both_counts_show_in_every_scrape(store_url: str, tmp_path: Path) -> None:
    with served(store_url, tmp_path, workers=2) as base:
        sid = httpx.post(f"{base}/sessions", json={"title": "w"}).json()["session_id"]

        def append(i: int) -> int:
            r = httpx.post(f"{base}/sessions/{sid}/nodes", json={"role": "user", "output": f"{i}"})
            return r.status_code

        sent, pids = 0, set()
        with ThreadPoolExecutor(8) as pool:
            while len(pids) < 2 and sent < 400:  # until both workers have served some
                assert set(pool.map(append, range(sent, sent + 16))) == {201}
                sent += 16
                samples = parse(httpx.get(f"{base}/metrics").text)
                # a working set's size is reported by a worker that projected a command
                # (the lag also by one that only caught up as it started, finding nothing)
                pids = {dict(ls).get("pid") for n, ls in samples if
                        n == "ctxstore_working_set_nodes"}  # fmt: skip
        assert len(pids) == 2, "one worker served every request"
        for _ in range(6):  # whichever worker answers, it shows both workers' counts
            samples = parse(httpx.get(f"{base}/metrics").text)
            stored = value(samples, "ctxstore_commands_total", command="append_node",
                           outcome="stored")  # fmt: skip
            assert stored == sent
            assert value(samples, "ctxstore_commands_total", command="start_session") == 1
            assert value(samples, "ctxstore_http_request_duration_seconds_count",
                         route="/sessions/{sid}/nodes") == sent  # fmt: skip


def test_json_logs_carry_ids_and_codes_never_content(store_url: str, tmp_path: Path) -> None:
    secret = {"Authorization": f"Bearer ctx_{MARKER}"}  # no key exists: loopback ignores it
    with served(store_url, tmp_path, CTXSTORE_LOG_FORMAT="json") as base:
        c = httpx.Client(base_url=base, headers=secret)
        sid = c.post("/sessions", json={"title": MARKER}).json()["session_id"]
        c.post(f"/sessions/{sid}/nodes", json={"role": "user", "output": MARKER})
        c.post(f"/sessions/{sid}/nodes", json={"role": "assistant", "output": MARKER})
        r = c.post(f"/sessions/{sid}/nodes", headers={"X-Request-Id": "req-42"},
                   json={"role": "tool", "name": MARKER, "input": {"q": MARKER},
                         "output": MARKER})  # fmt: skip
        assert r.status_code == 201 and r.headers["x-request-id"] == "req-42"
        assert c.post(f"/sessions/{sid}/nodes", json={"role": "user", "node_id": MARKER,
                                                      "predecessor": MARKER}
                      ).status_code >= 400  # fmt: skip
        assert MARKER in c.get(f"/sessions/{sid}/render").text
        assert c.get(f"/sessions/{sid}/explain/{MARKER}").status_code == 404
        generated = c.get("/health").headers["x-request-id"]
    text = (tmp_path / "err.log").read_text() + (tmp_path / "out.log").read_text()
    assert MARKER not in text
    lines = [json.loads(line) for line in (tmp_path / "err.log").read_text().splitlines()
             if line.startswith("{")]  # fmt: skip
    by_id = {line.get("request_id"): line for line in lines}
    tool = by_id["req-42"]
    assert tool["route"] == "/sessions/{sid}/nodes" and tool["session_id"] == sid
    assert tool["status"] == 201 and tool["command"] == "append_node"
    assert tool["outcome"] == "stored" and tool["tenant"] and tool["latency_ms"] >= 0
    assert by_id[generated]["route"] == "/health"


def test_a_body_the_helper_stored_is_counted_once(store_url: str, tmp_path: Path) -> None:
    """The large-body helper is another process: its command shows in the API's scrape,
    once (the helper counts it, the API process only the request)."""
    if not store_url.startswith("postgresql"):
        pytest.skip("the large-body lane needs PostgreSQL")
    with served(store_url, tmp_path, CTXSTORE_LARGE_BODY_LANE="1024") as base:
        deadline = time.monotonic() + 60
        while httpx.get(f"{base}/health").json().get("large_body_lane") != "ready":
            assert time.monotonic() < deadline, "the helper did not start"
            time.sleep(0.2)
        sid = httpx.post(f"{base}/sessions", json={"title": "big"}).json()["session_id"]
        r = httpx.post(f"{base}/sessions/{sid}/nodes",
                       json={"role": "user", "output": "x" * 8000})  # fmt: skip
        assert r.status_code == 201 and r.headers["ctxstore-lane"] == "helper"
        samples = parse(httpx.get(f"{base}/metrics").text)
    assert value(samples, "ctxstore_commands_total", command="append_node") == 1
    assert value(samples, "ctxstore_commands_total", command="append_node", outcome="stored") == 1
    assert value(samples, "ctxstore_http_request_duration_seconds_count",
                 route="/sessions/{sid}/nodes") == 1  # fmt: skip
    assert value(samples, "ctxstore_command_wait_seconds_count", command="append_node",
                 stage="event_store") == 1  # fmt: skip
