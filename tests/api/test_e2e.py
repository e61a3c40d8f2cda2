"""End to end: a real uvicorn server on a loopback port drives a whole agent session.

Tool calls, aging, a retry, a branch, an attach, a merge, usage measured,
compaction and a checkout go through HTTP only; then the projections are
rebuilt from the log and must come back byte-identical.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from projections.rebuild import rebuild_and_compare
from tests.conftest import IMMEDIATE_POLICY_JSON

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(store_url: str) -> Iterator[httpx.Client]:
    port = _free_port()
    # Aging as soon as due, so a short session shows it (batching waits for a fuller window).
    env = dict(os.environ, CTXSTORE_DATABASE_URL=store_url, PYTHONPATH=str(ROOT),
               CTXSTORE_POLICY=IMMEDIATE_POLICY_JSON)  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not come up")
            time.sleep(0.2)
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=30)


def post(client: httpx.Client, path: str, body: dict[str, Any]) -> Any:
    response = client.post(path, json=body)
    assert 200 <= response.status_code < 300, response.text
    return response.json()


def at(minute: int) -> str:
    return (
        f"2026-03-01T09:{minute:02d}:00+00:00"
        if minute < 60
        else (f"2026-03-01T{9 + minute // 60:02d}:{minute % 60:02d}:00+00:00")
    )


def test_whole_agent_session_over_http(server: httpx.Client, store_url: str) -> None:
    c = server
    sid = post(c, "/sessions", {"title": "fix the parser", "model": "openai:gpt-4o"})["session_id"]
    s = f"/sessions/{sid}"
    post(c, f"{s}/nodes", {"role": "system", "input": "You are a careful engineer.", "at": at(0)})
    task = post(c, f"{s}/nodes", {"role": "user", "input": "Fix the parser bug.", "at": at(1)})
    post(c, f"{s}/pin", {"node_id": task["node_id"]})
    post(c, f"{s}/runs/start", {})
    first_tool = None
    for turn in range(6):
        post(c, f"{s}/nodes", {"role": "assistant", "output": f"Step {turn}: reading.",
                                "at": at(2 + turn * 10)})  # fmt: skip
        tool = post(c, f"{s}/nodes", {
            "role": "tool", "name": "read_file", "input": {"path": f"src/p{turn}.py"},
            "output": "\n".join(f"line {i}" for i in range(900)), "at": at(3 + turn * 10),
        })  # fmt: skip
        first_tool = first_tool or tool["node_id"]
        post(c, f"{s}/nodes", {"role": "tool", "name": "web_search", "input": {"q": "parser"},
                                "output": "docs", "at": at(4 + turn * 10)})  # fmt: skip
    last = post(c, f"{s}/nodes", {"role": "assistant", "output": "Done.", "at": at(70)})

    # An edit while the agent runs is refused, and nothing is stored.
    before = c.get(f"{s}/events", params={"limit": 1000}).json()
    refused = c.post(f"{s}/nodes/{last['node_id']}/edit", json={"output": "Other"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "agent_running"
    assert c.get(f"{s}/events", params={"limit": 1000}).json() == before
    post(c, f"{s}/runs/finish", {})

    # Aging: the first read_file is outside the tail window, with the reason recorded.
    why = c.get(f"{s}/explain/{first_tool}").json()
    rules = [t["rule"] for t in why["transitions"]]
    assert "tool_aging" in rules and "per_item_cap" in rules
    aging = next(t for t in why["transitions"] if t["rule"] == "tool_aging")
    assert "> tail 3" in aging["inputs"] and aging["event_id"] and aging["commit_id"]

    retry = post(c, f"{s}/nodes/{last['node_id']}/retry", {"output": "Done."})
    assert post(c, f"{s}/checkout", {"node_id": last["node_id"], "version": 2})["version"]
    dag = c.get(f"{s}/dag").json()
    versions = {n["node_id"]: (n["version"], n["versions"]) for n in dag["nodes"]}
    assert versions[retry["node_id"]] == (2, 2)

    branch = post(c, f"{s}/branch", {"node_id": last["node_id"], "title": "alt"})
    b = f"/sessions/{branch['session_id']}"
    post(c, f"{b}/nodes", {"role": "user", "input": "Try another approach.", "at": at(80)})
    post(c, f"{s}/attach", {"source_session": branch["session_id"]})
    post(c, f"{s}/attach", {"source_session": branch["session_id"]})  # expands once
    items = c.get(f"{s}/context").json()["items"]
    attached = {i["attached_from"] for i in items if i["attached_from"]}
    assert len(attached) == 1
    opens = [i for i in items if i["item_id"].endswith(":open")]
    assert len(opens) == 1

    compacted = post(c, f"{s}/compact", {})
    assert compacted["covered"]
    items = c.get(f"{s}/context").json()["items"]
    summary = [i for i in items if i["state"] == "summary"]
    assert len(summary) == 1 and summary[0]["rendered"].startswith("[Summary]")
    assert {i["item_id"] for i in items if i["state"] == "summarized"} == set(compacted["covered"])
    assert task["node_id"] not in compacted["covered"]  # pinned: never folded

    peer = post(c, f"{b}/nodes", {"role": "assistant", "output": "Alt result.", "at": at(85)})
    merged = post(c, f"{s}/merge", {"peers": [{"session_id": branch["session_id"],
                                               "node_id": peer["node_id"]}]})  # fmt: skip
    head = c.get(f"{s}/context").json()
    assert len(head["parent_ids"]) == 2 and head["head_node_id"] == merged["node_id"]

    post(c, f"{s}/usage", {"request_id": "req-1", "input_tokens": 4200, "cache_read": 800})
    occupancy = c.get(f"{s}/occupancy").json()
    assert occupancy["basis"] == "measured" and occupancy["total_used"] == 5000
    assert occupancy["calibration"] is not None

    post(c, f"{s}/checkout", {"node_id": last["node_id"]})
    assert c.get(f"{s}/occupancy").json()["basis"] == "estimated"

    rendered = {shape: c.get(f"{s}/render", params={"shape": shape}).content
                for shape in ("neutral", "openai", "anthropic")}  # fmt: skip
    timeline = c.get(f"{s}/timeline").json()["commits"]
    assert timeline and all("counts" in row for row in timeline)

    result = rebuild_and_compare(store_url)
    assert result["identical"], result
    for shape, body in rendered.items():
        assert c.get(f"{s}/render", params={"shape": shape}).content == body
