"""Every command route: what it stores, and every way it refuses.

Runs against a real ``service.runtime.Runtime`` on SQLite and on a fresh
PostgreSQL database (``store_url``).  A refusal must carry a clear error code
AND leave the store untouched: the session's event count (from the replay
feed) and the projections' tracking position (from /health) are compared
before and after.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from api.app import create_app

# ------------------------------------------------------------------ helpers


def ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    return response.json()


def start(client: TestClient, **body: Any) -> str:
    return ok(client.post("/sessions", json={"title": "t", **body}), 201)["session_id"]


def append(client: TestClient, sid: str, role: str, output: Any = None, **body: Any) -> str:
    body = {"role": role, "output": output, **body}
    return ok(client.post(f"/sessions/{sid}/nodes", json=body), 201)["node_id"]


def events(client: TestClient, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        page = ok(client.get(f"/sessions/{sid}/events", params={"after": len(out), "limit": 1000}))
        out += page["events"]
        if not page["has_more"]:
            return out


def stored(client: TestClient, sid: str | None) -> tuple[int, int]:
    """(the session's event count, the projections' tracking position)."""
    count = len(events(client, sid)) if sid else -1
    return count, ok(client.get("/health"))["position"]


def refused(client: TestClient, sid: str | None, path: str, status: int, code: str,
            body: Any = None, content: bytes | None = None) -> dict[str, Any]:  # fmt: skip
    """POST that must be refused with ``status``/``code`` and store nothing."""
    before = stored(client, sid)
    if content is not None:
        r = client.post(path, content=content, headers={"content-type": "application/json"})
    else:
        r = client.post(path, json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    assert stored(client, sid) == before, "a refused command stored something"
    return error


def types(client: TestClient, sid: str) -> list[str]:
    return [e["type"] for e in events(client, sid)]


class World:
    """main: u1 a1 t1(tool of a1) a2 u2 a3 u3 a4, plus a4b (an edit of a4);
    HEAD is back on a4.  other: one user node o1."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.sid = start(client, title="main")
        c, s = client, self.sid
        self.u1 = append(c, s, "user", "Please read x.py. Then fix it.", node_id="u1")
        self.a1 = append(c, s, "assistant", "Reading it.", node_id="a1")
        self.t1 = append(c, s, "tool", "print('x')", node_id="t1", name="read_file",
                         input={"path": "x.py"})  # fmt: skip
        self.a2 = append(c, s, "assistant", "It prints x.", node_id="a2")
        self.u2 = append(c, s, "user", "Make it print y.", node_id="u2")
        self.a3 = append(c, s, "assistant", "Done: prints y.", node_id="a3")
        self.u3 = append(c, s, "user", "Thanks.", node_id="u3")
        self.a4 = append(c, s, "assistant", "You're welcome.", node_id="a4")
        edit = c.post(f"/sessions/{s}/nodes/a4/edit", json={"output": "Anytime.", "node_id": "a4b"})
        self.a4b = ok(edit, 201)["node_id"]
        ok(c.post(f"/sessions/{s}/checkout", json={"node_id": "a4"}))
        self.other = start(client, title="other")
        self.o1 = append(c, self.other, "user", "Side quest.", node_id="o1")

    @property
    def version(self) -> int:
        return len(events(self.client, self.sid))


@pytest.fixture
def world(client: TestClient) -> World:
    return World(client)


# Every command on the main session, with a body that is valid in World.
# (path under /sessions/{sid}, body, needs an active run first)
COMMANDS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "append": ("/nodes", {"role": "user", "output": "more"}, False),
    "batch": (
        "/nodes/batch",
        {"nodes": [{"role": "user", "output": "more"}, {"role": "assistant", "output": "ok"}]},
        False,
    ),
    "retry": ("/nodes/a4/retry", {"output": "You're welcome."}, False),
    "edit": ("/nodes/a4/edit", {"output": "My pleasure."}, False),
    "checkout": ("/checkout", {"node_id": "a3"}, False),
    "pin": ("/pin", {"node_id": "u2"}, False),
    "unpin": ("/unpin", {"node_id": "u2"}, False),
    "attach": ("/attach", {"source_session": "OTHER"}, False),
    "merge": ("/merge", {"peers": [{"node_id": "a4b"}]}, False),
    "usage": ("/usage", {"request_id": "req-1", "input_tokens": 120}, False),
    "run_start": ("/runs/start", {}, False),
    "run_finish": ("/runs/finish", {}, True),
    "model": ("/model", {"model": "anthropic:claude-sonnet-4"}, False),
    "compact": ("/compact", {}, False),
    "branch": ("/branch", {"node_id": "a2"}, False),
}


def body_for(world: World, name: str, **extra: Any) -> dict[str, Any]:
    body = dict(COMMANDS[name][1])
    if body.get("source_session") == "OTHER":
        body["source_session"] = world.other
    return {**body, **extra}


def path_for(world: World, name: str, sid: str | None = None) -> str:
    return f"/sessions/{sid or world.sid}{COMMANDS[name][0]}"


# --------------------------------------------------------------- happy paths


def test_start_session(client: TestClient) -> None:
    r = ok(client.post("/sessions", json={"title": "hello"}), 201)
    assert r["version"] == 1
    uuid.UUID(r["session_id"])
    [event] = events(client, r["session_id"])
    assert event["type"] == "SessionStarted"
    assert event["data"]["title"] == "hello" and event["data"]["model"] == "openai:gpt-4o"
    r2 = ok(client.post("/sessions", json={"title": "w", "model": "local:tiny",
                                           "context_window": 4096}), 201)  # fmt: skip
    data = events(client, r2["session_id"])[0]["data"]
    assert (data["model"], data["context_window"]) == ("local:tiny", 4096)


def test_append_node_returns_node_id_and_version(client: TestClient) -> None:
    sid = start(client)
    r = ok(client.post(f"/sessions/{sid}/nodes", json={"role": "user", "output": "hi"}), 201)
    assert r["session_id"] == sid and r["version"] == 2
    uuid.UUID(r["node_id"])
    r = ok(client.post(f"/sessions/{sid}/nodes", json={
        "role": "assistant", "node_id": "a", "output": "hello", "metadata": {"k": [1]},
        "expected_version": 2, "at": "2025-01-02T03:04:05+01:00"}), 201)  # fmt: skip
    assert (r["node_id"], r["version"]) == ("a", 3)
    tool_body = {"role": "tool", "name": "ls", "input": {"dir": "."}, "output": "a b"}
    t = ok(client.post(f"/sessions/{sid}/nodes", json=tool_body), 201)
    feed = events(client, sid)
    assert [e["type"] for e in feed] == ["SessionStarted"] + ["NodeAppended"] * 3
    assistant, tool = feed[2], feed[3]
    assert assistant["data"]["predecessor"] == r_node(feed[1])
    assert assistant["data"]["metadata"] == {"k": [1]}
    assert assistant["timestamp"].startswith("2025-01-02T02:04:05")
    assert tool["data"]["caller"] == "a" and tool["data"]["node_id"] == t["node_id"]
    dag = ok(client.get(f"/sessions/{sid}/dag"))
    assert dag["head"] == t["node_id"]
    assert {n["node_id"] for n in dag["nodes"]} >= {"a", t["node_id"]}


def r_node(event: dict[str, Any]) -> str:
    return event["data"]["node_id"]


def test_retry_and_edit_add_sibling_versions(world: World) -> None:
    c, s = world.client, world.sid
    retry = ok(c.post(f"/sessions/{s}/nodes/a4/retry", json={"output": "You're welcome."}), 201)
    edit = ok(c.post(f"/sessions/{s}/nodes/a4/edit", json={"output": "Sure."}), 201)
    assert retry["sibling_of"] == "a4" and edit["version"] == retry["version"] + 1
    feed = events(c, s)
    kinds = {e["data"]["node_id"]: e["data"]["version_kind"] for e in feed
             if e["type"] == "NodeAppended" and e["data"]["sibling_of"] == "a4"}  # fmt: skip
    # the route says which kind it is
    assert kinds == {"a4b": "edit", retry["node_id"]: "retry", edit["node_id"]: "edit"}
    assert (retry["kind"], edit["kind"]) == ("retry", "edit")
    dag = ok(c.get(f"/sessions/{s}/dag"))
    node = next(n for n in dag["nodes"] if n["node_id"] == edit["node_id"])
    assert node["versions"] == 4 and len(node["sibling_ids"]) == 4


def test_retry_is_a_new_sample_and_edit_is_an_edit_whatever_the_content(world: World) -> None:
    """A regenerated answer has new text and is still a retry; an edit may keep the text."""
    c, s = world.client, world.sid
    sample = ok(c.post(f"/sessions/{s}/nodes/a4/retry", json={"output": "Different."}), 201)
    same = ok(c.post(f"/sessions/{s}/nodes/a4/edit", json={"output": "You're welcome."}), 201)
    kinds = {e["data"]["node_id"]: e["data"]["version_kind"] for e in events(c, s)
             if e["type"] == "NodeAppended"}  # fmt: skip
    assert kinds[sample["node_id"]] == "retry" and kinds[same["node_id"]] == "edit"
    dag = {n["node_id"]: n for n in ok(c.get(f"/sessions/{s}/dag"))["nodes"]}
    assert dag[sample["node_id"]]["version_kind"] == "retry"


def test_checkout_moves_head(world: World) -> None:
    c, s = world.client, world.sid
    r = ok(c.post(f"/sessions/{s}/checkout", json={"node_id": "a2"}))
    assert r["head"] == "a2"
    assert ok(c.get(f"/sessions/{s}/dag"))["head"] == "a2"
    r = ok(c.post(f"/sessions/{s}/checkout", json={"node_id": "a4", "version": 2}))
    assert r["head"] == "a4b"
    assert events(c, s)[-1]["type"] == "HeadMoved"


def test_branch_starts_a_new_session(world: World) -> None:
    c = world.client
    r = ok(c.post(f"/sessions/{world.sid}/branch", json={"node_id": "a2", "title": "alt"}), 201)
    new = r["session_id"]
    assert new != world.sid and r["version"] == 1
    assert r["branched_from"] == {"session_id": world.sid, "node_id": "a2"}
    [started] = events(c, new)
    assert started["data"]["branched_from"]["node_id"] == "a2"
    assert started["data"]["title"] == "alt"
    n = append(c, new, "user", "continue on the branch")
    assert ok(c.get(f"/sessions/{new}/dag"))["head"] == n


def test_pin_and_unpin(world: World) -> None:
    c, s = world.client, world.sid
    r = ok(c.post(f"/sessions/{s}/pin", json={"node_id": "u2"}))
    assert r["pinned"] is True and r["node_id"] == "u2"
    again = ok(c.post(f"/sessions/{s}/pin", json={"node_id": "u2"}))
    assert again["version"] == r["version"]  # already pinned: nothing new stored
    r = ok(c.post(f"/sessions/{s}/unpin", json={"node_id": "u2"}))
    assert r["pinned"] is False
    assert types(c, s)[-2:] == ["NodePinned", "NodeUnpinned"]


def test_attach_another_session(world: World) -> None:
    c, s = world.client, world.sid
    r = ok(c.post(f"/sessions/{s}/attach", json={"source_session": world.other}), 201)
    last = events(c, s)[-1]
    assert last["type"] == "AttachStaged" and last["data"]["node_id"] == r["node_id"]
    assert last["data"]["source_session"] == world.other and last["data"]["source_head"] == "o1"


def test_merge_peer_heads(world: World) -> None:
    c, s = world.client, world.sid
    r = ok(c.post(f"/sessions/{s}/merge", json={"peers": [{"node_id": "a4b"}]}), 201)
    assert types(c, s)[-2:] == ["MergeStarted", "MergeCompleted"]
    done = events(c, s)[-1]["data"]
    assert done["node_id"] == r["node_id"]
    assert done["peers"] == [{"session_id": s, "node_id": "a4b"}]
    peers = [{"session_id": world.other, "node_id": "o1"}]
    r2 = ok(c.post(f"/sessions/{s}/merge", json={"peers": peers}), 201)
    assert r2["version"] == r["version"] + 2


def test_usage_runs_and_model(world: World) -> None:
    c, s = world.client, world.sid
    usage_body = {"request_id": "q1", "input_tokens": 900, "cache_read": 100, "output_tokens": 20}
    r = ok(c.post(f"/sessions/{s}/usage", json=usage_body), 201)
    assert r["request_id"] == "q1"
    usage = events(c, s)[-1]
    assert usage["type"] == "UsageMeasured" and usage["data"]["head_node"] == "a4"
    assert usage["data"]["provider"] == "openai"
    run = ok(c.post(f"/sessions/{s}/runs/start", json={"run_id": "run-1"}), 201)
    assert run["run_id"] == "run-1"
    append(c, s, "user", "agents may append while running")
    fin = ok(c.post(f"/sessions/{s}/runs/finish", json={"status": "failed"}))
    assert fin["status"] == "failed"
    assert events(c, s)[-1]["data"]["status"] == "failed"
    m = ok(c.post(f"/sessions/{s}/model", json={"model": "local:tiny", "context_window": 9000}))
    assert (m["model"], m["context_window"]) == ("local:tiny", 9000)
    assert ok(c.get(f"/sessions/{s}/occupancy"))["model"] == "local:tiny"


def test_compact_records_a_summary(world: World) -> None:
    c, s = world.client, world.sid
    before = world.version
    r = ok(c.post(f"/sessions/{s}/compact", json={"expected_version": before}), 201)
    assert r["session_id"] == s and r["version"] == before + 1
    assert r["summary_id"] and r["covered"]
    last = events(c, s)[-1]
    assert last["type"] == "SummaryRecorded" and last["data"]["covered"] == r["covered"]
    assert last["data"]["summarizer"] == "extractive"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_answers_session_id_and_version(world: World, name: str) -> None:
    c = world.client
    if COMMANDS[name][2]:
        ok(c.post(f"/sessions/{world.sid}/runs/start", json={}), 201)
    r = c.post(path_for(world, name), json=body_for(world, name))
    assert r.status_code in (200, 201), r.text
    body = r.json()
    assert isinstance(body["version"], int)
    if name == "branch":
        assert body["session_id"] != world.sid
    else:
        assert body["session_id"] == world.sid and body["version"] == world.version


def test_returned_version_is_the_session_version_after_auto_compaction(
    client: TestClient,
) -> None:
    sid = start(client, model="local:tiny")
    version = 1
    for i in range(60):
        body = {"role": "user" if i % 2 == 0 else "assistant", "output": "word " * 150 + str(i),
                "expected_version": version}  # fmt: skip
        version = ok(client.post(f"/sessions/{sid}/nodes", json=body), 201)["version"]
        assert version == len(events(client, sid))
    assert "SummaryRecorded" in types(client, sid)


# ----------------------------------------------------------------- refusals

ALL_POSTS = ["start", *sorted(COMMANDS)]


def post_path(world: World, name: str, sid: str | None = None) -> str:
    return "/sessions" if name == "start" else path_for(world, name, sid)


@pytest.mark.parametrize("name", ALL_POSTS)
@pytest.mark.parametrize("content", [b'{"role": "user",', b"not json", b"\xff\xfe{}", b"{'a': 1}"])
def test_malformed_json(world: World, name: str, content: bytes) -> None:
    refused(world.client, world.sid, post_path(world, name), 400, "malformed_json",
            content=content)  # fmt: skip


WRONG_TYPES: dict[str, list[dict[str, Any]]] = {
    "start": [{"title": 5}, {"model": None}, {"context_window": "big"}, {"context_window": 0}],
    "append": [{"role": ["user"]}, {"role": "user", "reads": "u1"},
               {"role": "user", "metadata": [1]}, {"role": "user", "expected_version": "9"},
               {"role": "user", "at": "yesterday"}, {"role": "user", "at": "2025-01-01T00:00:00"},
               {"output": "no role"}],
    "batch": [{}, {"nodes": {}}, {"nodes": [{"role": 5}]}, {"nodes": [{"kind": "other"}]}],
    "retry": [{"node_id": 7}, {"metadata": "x"}, {"expected_version": True}],
    "edit": [{"name": 3}, {"node_id": ""}],
    "checkout": [{}, {"node_id": "a1", "version": "2"}, {"node_id": ["a1"]}],
    "branch": [{}, {"node_id": 1}, {"node_id": "a1", "title": False}],
    "pin": [{}, {"node_id": True}],
    "unpin": [{"node_id": None}],
    "attach": [{}, {"source_session": 42}, {"source_session": "x", "source_head": {}}],
    "merge": [{}, {"peers": "a4b"}, {"peers": [{"session_id": "x"}]}, {"peers": [5]}],
    "usage": [{"request_id": "r"}, {"request_id": "r", "input_tokens": "100"},
              {"request_id": "r", "input_tokens": 1.5}, {"request_id": 1, "input_tokens": 1}],
    "run_start": [{"run_id": 5}],
    "run_finish": [{"status": 1}],
    "model": [{}, {"model": "x:y", "context_window": 1.5}, {"model": 4}],
    "compact": [{"expected_version": "3"}],
}  # fmt: skip


@pytest.mark.parametrize(
    "name,body", [(n, b) for n, bodies in WRONG_TYPES.items() for b in bodies],
    ids=lambda v: v if isinstance(v, str) else None,
)  # fmt: skip
def test_wrong_types(world: World, name: str, body: dict[str, Any]) -> None:
    err = refused(world.client, world.sid, post_path(world, name), 422, "invalid_request", body)
    assert err["details"]["errors"], err
    assert all({"loc", "msg", "type"} <= set(e) for e in err["details"]["errors"])


@pytest.mark.parametrize("name", ALL_POSTS)
def test_unknown_fields_and_non_object_bodies(world: World, name: str) -> None:
    base = {} if name == "start" else body_for(world, name)
    path = post_path(world, name)
    err = refused(world.client, world.sid, path, 422, "invalid_request", {**base, "bogus": 1})
    assert err["details"]["errors"][0]["loc"] == ["bogus"]
    for body in ([base], "text", 3, None):
        refused(world.client, world.sid, path, 422, "invalid_request",
                content=json.dumps(body).encode())  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("sid", [str(uuid.UUID(int=7)), "not-a-session"])
def test_unknown_session(world: World, name: str, sid: str) -> None:
    version = world.version
    refused(world.client, None, post_path(world, name, sid), 404, "session_not_found",
            body_for(world, name))  # fmt: skip
    assert world.version == version  # the real session is untouched too


UNKNOWN_NODES: list[tuple[str, str, dict[str, Any], str]] = [
    ("append predecessor", "/nodes", {"role": "user", "predecessor": "nope"}, "node_not_found"),
    ("append caller", "/nodes", {"role": "tool", "caller": "nope"}, "node_not_found"),
    ("append reads", "/nodes", {"role": "user", "reads": ["u1", "nope"]}, "node_not_found"),
    ("retry", "/nodes/nope/retry", {"output": "x"}, "node_not_found"),
    ("edit", "/nodes/nope/edit", {"output": "x"}, "node_not_found"),
    ("checkout", "/checkout", {"node_id": "nope"}, "node_not_found"),
    ("branch", "/branch", {"node_id": "nope"}, "node_not_found"),
    ("pin", "/pin", {"node_id": "nope"}, "node_not_found"),
    ("unpin", "/unpin", {"node_id": "nope"}, "node_not_found"),
    ("attach head", "/attach", {"source_session": "OTHER", "source_head": "nope"},
     "node_not_found"),
    ("attach session", "/attach", {"source_session": str(uuid.UUID(int=9))}, "session_not_found"),
    ("merge own", "/merge", {"peers": [{"node_id": "nope"}]}, "node_not_found"),
    ("merge peer", "/merge", {"peers": [{"session_id": "OTHER", "node_id": "nope"}]},
     "node_not_found"),
    ("merge peer session", "/merge", {"peers": [{"session_id": str(uuid.UUID(int=9)),
                                                 "node_id": "o1"}]}, "session_not_found"),
    ("usage head", "/usage", {"request_id": "r", "input_tokens": 1, "head_node": "nope"},
     "node_not_found"),
]  # fmt: skip


def _other(world: World, value: Any) -> Any:
    if value == "OTHER":
        return world.other
    if isinstance(value, dict):
        return {k: _other(world, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_other(world, v) for v in value]
    return value


@pytest.mark.parametrize("case", UNKNOWN_NODES, ids=[c[0] for c in UNKNOWN_NODES])
def test_unknown_node(world: World, case: tuple[str, str, dict[str, Any], str]) -> None:
    _, path, body, code = case
    refused(world.client, world.sid, f"/sessions/{world.sid}{path}", 404, code,
            _other(world, body))  # fmt: skip


@pytest.mark.parametrize("name", ["retry", "edit", "merge", "run_start"])
def test_refused_while_an_agent_run_is_active(world: World, name: str) -> None:
    c = world.client
    ok(c.post(f"/sessions/{world.sid}/runs/start", json={"run_id": "r1"}), 201)
    err = refused(c, world.sid, path_for(world, name), 409, "agent_running",
                  body_for(world, name))  # fmt: skip
    assert err["details"]["run_id"] == "r1"
    ok(c.post(f"/sessions/{world.sid}/runs/finish", json={}))
    ok(c.post(path_for(world, name), json=body_for(world, name)), 201)  # allowed again


def test_finish_without_a_run(world: World) -> None:
    refused(world.client, world.sid, path_for(world, "run_finish"), 409, "agent_not_running", {})


STALEABLE = sorted(COMMANDS)


@pytest.mark.parametrize("name", STALEABLE)
def test_stale_version(world: World, name: str) -> None:
    c = world.client
    if COMMANDS[name][2]:
        ok(c.post(f"/sessions/{world.sid}/runs/start", json={}), 201)
    current = world.version
    path = path_for(world, name)
    for stale in (current - 1, current + 1, 0):
        err = refused(c, world.sid, path, 409, "stale_version",
                      body_for(world, name, expected_version=stale))  # fmt: skip
        assert err["details"] == {"expected": stale, "actual": current}
    r = c.post(path, json=body_for(world, name, expected_version=current))
    assert r.status_code in (200, 201), r.text


DOMAIN_REFUSALS: list[tuple[str, str, dict[str, Any], int, str]] = [
    ("tool with predecessor", "/nodes", {"role": "tool", "predecessor": "a1"}, 422,
     "invalid_edge"),
    ("tool caller not assistant", "/nodes", {"role": "tool", "caller": "u1"}, 422,
     "invalid_edge"),
    ("both edges", "/nodes", {"role": "user", "predecessor": "a1", "caller": "a1"}, 422,
     "invalid_edge"),
    ("unknown role", "/nodes", {"role": "robot"}, 422, "invalid_command"),
    ("duplicate node", "/nodes", {"role": "user", "node_id": "u1"}, 409, "duplicate_node"),
    ("checkout version", "/checkout", {"node_id": "a4", "version": 3}, 422, "invalid_command"),
    ("model format", "/model", {"model": "gpt-4o"}, 422, "invalid_command"),
    ("negative tokens", "/usage", {"request_id": "r", "input_tokens": -1}, 422,
     "invalid_command"),
    ("attach self", "/attach", {"source_session": "SELF"}, 422, "invalid_command"),
    ("merge with itself", "/merge", {"peers": [{"node_id": "a4"}]}, 422, "merge_refused"),
    ("merge nobody", "/merge", {"peers": []}, 422, "merge_refused"),
    ("merge a peer twice", "/merge", {"peers": [{"node_id": "a4b"}, {"node_id": "a4b"}]}, 422,
     "merge_refused"),
    ("merge self spelt upper", "/merge", {"peers": [{"session_id": "SELF_UPPER",
     "node_id": "a4"}]}, 404, "session_not_found"),
    ("tokens over int32", "/usage", {"request_id": "r", "input_tokens": 2**31}, 422,
     "invalid_command"),
    ("tokens over int64", "/usage", {"request_id": "r", "cache_read": 2**64, "input_tokens": 1},
     422, "invalid_command"),
    ("node id with a slash", "/nodes", {"role": "user", "node_id": "a/b"}, 422,
     "invalid_command"),
    ("provider over 64", "/model", {"model": "p" * 65 + ":m"}, 422, "invalid_command"),
    ("time out of range", "/nodes", {"role": "user", "at": "0001-01-01T00:00:00+01:00"}, 422,
     "invalid_request"),
]  # fmt: skip


@pytest.mark.parametrize("case", DOMAIN_REFUSALS, ids=[c[0] for c in DOMAIN_REFUSALS])
def test_domain_refusals(world: World, case: tuple[str, str, dict[str, Any], int, str]) -> None:
    _, path, body, status, code = case
    body = {k: (world.sid if v == "SELF" else v) for k, v in body.items()}
    if "peers" in body:
        body["peers"] = [{k: (world.sid.upper() if v == "SELF_UPPER" else v)
                          for k, v in peer.items()} for peer in body["peers"]]  # fmt: skip
    refused(world.client, world.sid, f"/sessions/{world.sid}{path}", status, code, body)


def test_another_sessions_node_id_is_free_in_this_one(world: World) -> None:
    """Node ids are unique per session (the model's own ids repeat across sessions)."""
    r = world.client.post(f"/sessions/{world.sid}/nodes", json={"role": "user", "node_id": "o1"})
    assert r.status_code == 201 and r.json()["node_id"] == "o1", r.text
    nodes = world.client.get(f"/sessions/{world.sid}/nodes").json()["nodes"]
    assert [n["session_id"] for n in nodes if n["node_id"] == "o1"] == [world.sid]


@pytest.mark.parametrize("spelling", ["upper", "hex", "urn", "braces"])
def test_a_session_id_in_another_spelling_is_not_found_and_stores_nothing(
    world: World, spelling: str
) -> None:
    """``UUID()`` parses these, but only the canonical text names a session."""
    canonical = uuid.UUID(world.sid)
    other = {"upper": world.sid.upper(), "hex": canonical.hex, "urn": canonical.urn,
             "braces": "{" + world.sid + "}"}[spelling]  # fmt: skip
    for name in ("append", "retry", "edit", "attach", "merge", "model", "run_start", "usage"):
        path = f"/sessions/{other}{COMMANDS[name][0]}"
        refused(world.client, world.sid, path, 404, "session_not_found", body_for(world, name))
    r = world.client.get(f"/sessions/{other}/events")
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"


def test_the_root_of_an_attach_has_no_versions(client: TestClient) -> None:
    source = start(client)
    append(client, source, "user", "context", node_id="s1")
    target = start(client)
    attached = ok(client.post(f"/sessions/{target}/attach", json={"source_session": source}), 201)
    node = attached["node_id"]
    for verb in ("edit", "retry"):
        refused(client, target, f"/sessions/{target}/nodes/{node}/{verb}", 422,
                "invalid_command", {"input": "x"})  # fmt: skip


def test_finish_status_is_a_short_label(client: TestClient) -> None:
    sid = start(client)
    ok(client.post(f"/sessions/{sid}/runs/start", json={}), 201)
    for status in ("x" * 129, "bad\x00status"):
        refused(client, sid, f"/sessions/{sid}/runs/finish", 422, "invalid_command",
                {"status": status})  # fmt: skip
    ok(client.post(f"/sessions/{sid}/runs/finish", json={"status": "failed"}))


def test_events_after_beyond_any_version_is_a_validation_error(world: World) -> None:
    r = world.client.get(f"/sessions/{world.sid}/events", params={"after": 2**63})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    assert ok(world.client.get(f"/sessions/{world.sid}/events",
                               params={"after": 2**63 - 1}))["events"] == []  # fmt: skip


def test_start_session_refusals_store_nothing(client: TestClient) -> None:
    refused(client, None, "/sessions", 422, "invalid_command", {"model": "gpt-4o"})
    refused(client, None, "/sessions", 400, "malformed_json", content=b"{")


def test_compact_with_nothing_to_compact(client: TestClient) -> None:
    sid = start(client)
    refused(client, sid, f"/sessions/{sid}/compact", 409, "nothing_to_compact", {})
    append(client, sid, "user", "hi")
    append(client, sid, "assistant", "hello")
    refused(client, sid, f"/sessions/{sid}/compact", 409, "nothing_to_compact", {})


def test_branch_of_a_branch_point_and_empty_attach(client: TestClient) -> None:
    empty = start(client)
    sid = start(client)
    append(client, sid, "user", "hi", node_id="h")
    refused(client, sid, f"/sessions/{sid}/attach", 422, "invalid_command",
            {"source_session": empty})  # fmt: skip
    refused(client, empty, f"/sessions/{empty}/merge", 422, "merge_refused",
            {"peers": [{"session_id": sid, "node_id": "h"}]})  # fmt: skip


# ------------------------------------------- reading back what commands stored


def test_events_feed_pages_by_version(world: World) -> None:
    c, s = world.client, world.sid
    total = world.version
    first = ok(c.get(f"/sessions/{s}/events", params={"limit": 4}))
    assert [e["originator_version"] for e in first["events"]] == [1, 2, 3, 4]
    assert first["has_more"] and first["next_after"] == 4
    rest = ok(c.get(f"/sessions/{s}/events", params={"after": 4, "limit": 1000}))
    assert rest["events"][0]["originator_version"] == 5 and not rest["has_more"]
    assert rest["next_after"] == total
    end = ok(c.get(f"/sessions/{s}/events", params={"after": total}))
    assert end["events"] == [] and end["next_after"] == total and not end["has_more"]
    assert all(e["originator_id"] == s for e in first["events"] + rest["events"])


def test_context_render_and_commits(world: World) -> None:
    c, s = world.client, world.sid
    head = ok(c.get(f"/sessions/{s}/context"))
    assert head["session_id"] == s and head["head_node_id"] == "a4"
    sources = [i["source_node_id"] for i in head["items"]]
    assert "a4b" not in sources and {"u1", "a1", "t1", "a4"} <= set(sources)
    assert ok(c.get(f"/sessions/{s}/commits/{head['id']}")) == head
    for shape in ("neutral", "openai", "anthropic"):
        r = ok(c.get(f"/sessions/{s}/render", params={"shape": shape}))
        assert r["shape"] == shape and r["commit_id"] == head["id"]
        again = c.get(f"/sessions/{s}/render", params={"shape": shape, "commit": head["id"]})
        assert again.content == c.get(f"/sessions/{s}/render?shape={shape}").content
    timeline = ok(c.get(f"/sessions/{s}/timeline"))
    assert timeline["session_id"] == s
    assert head["id"] in {t["commit_id"] for t in timeline["commits"]}


def test_render_follows_the_head(world: World) -> None:
    c, s = world.client, world.sid
    before = c.get(f"/sessions/{s}/render", params={"shape": "openai"})
    old = before.json()["commit_id"]
    append(c, s, "user", "A brand new question?")
    after = c.get(f"/sessions/{s}/render", params={"shape": "openai"})
    assert after.json()["commit_id"] != old
    assert "A brand new question?" in after.text and "A brand new question?" not in before.text
    pinned = c.get(f"/sessions/{s}/render", params={"shape": "openai", "commit": old})
    # the same request; the answer also says the session's version, which moved on
    assert pinned.json() == {**before.json(), "version": after.json()["version"]}
    ok(c.post(f"/sessions/{s}/checkout", json={"node_id": "a4b"}))
    moved = c.get(f"/sessions/{s}/render", params={"shape": "openai"})
    assert "Anytime." in moved.text and "A brand new question?" not in moved.text


def test_explain_occupancy_budget_dag(world: World) -> None:
    c, s = world.client, world.sid
    why = ok(c.get(f"/sessions/{s}/explain/t1"))
    assert why["node_id"] == "t1" and isinstance(why["transitions"], list)
    occ = ok(c.get(f"/sessions/{s}/occupancy"))
    assert occ["basis"] == "estimated" and occ["window"] == 128_000 and occ["head_node_id"] == "a4"
    ok(c.post(f"/sessions/{s}/usage", json={"request_id": "r", "input_tokens": 1000}), 201)
    assert ok(c.get(f"/sessions/{s}/occupancy"))["basis"] == "measured"
    budget = ok(c.get(f"/sessions/{s}/budget"))
    assert budget["window"] == 128_000 and budget["status"] == "ok"
    dag = ok(c.get(f"/sessions/{s}/dag"))
    by_id = {n["node_id"]: n for n in dag["nodes"]}
    assert by_id["t1"]["parent"] == "a1" and by_id["t1"]["edge"] == "caller"
    assert (by_id["a4b"]["version"], by_id["a4b"]["versions"]) == (2, 2)


def sse_frames(text: str) -> list[tuple[str, dict[str, Any]]]:
    frames = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            frames.append((fields["event"], json.loads(fields["data"])))
    return frames


def test_stream_once_sends_occupancy_and_timeline(world: World) -> None:
    c, s = world.client, world.sid
    with c.stream("GET", f"/sessions/{s}/stream", params={"once": "1"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        text = r.read().decode()
    frames = sse_frames(text)
    assert [name for name, _ in frames] == ["occupancy", "timeline"]
    assert frames[0][1] == ok(c.get(f"/sessions/{s}/occupancy"))
    assert frames[1][1] == ok(c.get(f"/sessions/{s}/timeline"))


def test_health_and_openapi(client: TestClient) -> None:
    assert ok(client.get("/health"))["status"] == "ok"
    doc = ok(client.get("/openapi.json"))
    assert "/sessions/{sid}/nodes/{nid}/retry" in doc["paths"]


def test_stream_pushes_changes_and_stops_when_the_client_leaves(runtime: Any) -> None:
    """Over a real uvicorn server: a write shows up on the stream, and a client
    that disconnects does not keep the server from shutting down."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(runtime), log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=10)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        with httpx.Client(base_url=base, timeout=10) as http:
            sid = http.post("/sessions", json={}).json()["session_id"]
            http.post(f"/sessions/{sid}/nodes", json={"role": "user", "output": "one"})
            seen: list[tuple[str, dict[str, Any]]] = []
            params = {"interval": "0.05"}
            with http.stream("GET", f"/sessions/{sid}/stream", params=params) as r:
                assert r.status_code == 200
                lines = r.iter_lines()
                block: list[str] = []
                wrote = False
                while time.monotonic() < deadline + 10:
                    line = next(lines)
                    if line:
                        block.append(line)
                        continue
                    seen += sse_frames("\n".join(block))
                    block = []
                    if len(seen) == 2 and not wrote:
                        body = {"role": "assistant", "output": "two words here"}
                        httpx.post(f"{base}/sessions/{sid}/nodes", json=body, timeout=10)
                        wrote = True
                    if len(seen) >= 4:
                        break
            assert [name for name, _ in seen[:2]] == ["occupancy", "timeline"]
            pushed = dict(seen[2:])
            assert pushed["occupancy"]["estimated"] > seen[0][1]["estimated"]
            # only the new commit's entry; with the first frame, the whole timeline
            opened = seen[1][1]["commits"]
            assert pushed["timeline_append"]["commits"] == http.get(
                f"/sessions/{sid}/timeline").json()["commits"][len(opened):]  # fmt: skip
            assert len(pushed["timeline_append"]["commits"]) == 1
    finally:
        started = time.monotonic()
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
    assert not thread.is_alive() and time.monotonic() - started < 5
