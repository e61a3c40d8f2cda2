"""The integration surface: one session, batch append, render's head and version, paging."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.test_commands import World, append, events, ok, refused, start, types


@pytest.fixture
def world(client: TestClient) -> World:
    return World(client)


def test_get_one_session(world: World) -> None:
    c, s = world.client, world.sid
    ok(c.post(f"/sessions/{s}/pin", json={"node_id": "u2"}))
    ok(c.post(f"/sessions/{s}/usage", json={"request_id": "r1", "input_tokens": 10}), 201)
    info = ok(c.get(f"/sessions/{s}"))
    assert info["session_id"] == s and info["title"] == "main"
    assert info["head"] == "a4" and info["version"] == len(events(c, s))
    assert (info["model"], info["window"], info["context_window"]) == ("openai:gpt-4o", 128_000,
                                                                       None)  # fmt: skip
    assert info["pinned"] == ["u2"] and info["running"] is None
    assert info["branched_from"] is None and isinstance(info["created_at"], float)
    assert info["counts"]["nodes"] == 9 and info["counts"]["events"] == info["version"]
    assert info["counts"]["commits"] == len(ok(c.get(f"/sessions/{s}/timeline"))["commits"])
    assert info["counts"]["usage"] == 1
    assert info["head_commit_id"] == ok(c.get(f"/sessions/{s}/context"))["id"]
    branch = ok(c.post(f"/sessions/{s}/branch", json={"node_id": "a2"}), 201)["session_id"]
    b = ok(c.get(f"/sessions/{branch}"))
    assert b["branched_from"] == {"session_id": s, "node_id": "a2"} and b["counts"]["nodes"] == 0
    missing = c.get("/sessions/00000000-0000-0000-0000-000000000007")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "session_not_found"


def test_batch_appends_a_turn_and_its_parallel_calls_in_one_command(client: TestClient) -> None:
    sid = start(client)
    append(client, sid, "user", "Look at three files.", node_id="q")
    before = len(events(client, sid))
    body = {"expected_version": before, "nodes": [
        {"role": "assistant", "node_id": "turn", "output": "Reading all three."},
        *({"role": "tool", "node_id": f"call{i}", "caller": "turn", "name": "read_file",
           "input": {"path": f"f{i}.py"}, "output": f"contents {i}"} for i in range(3)),
    ]}  # fmt: skip
    r = ok(client.post(f"/sessions/{sid}/nodes/batch", json=body), 201)
    assert r["node_ids"] == ["turn", "call0", "call1", "call2"]
    assert r["version"] == before + 4 == len(events(client, sid))
    head = ok(client.get(f"/sessions/{sid}/context"))
    assert head["head_node_id"] == "call2"
    assert {"turn", "call0", "call1", "call2"} <= {i["source_node_id"] for i in head["items"]}
    dag = {n["node_id"]: n for n in ok(client.get(f"/sessions/{sid}/dag"))["nodes"]}
    assert all(dag[f"call{i}"]["parent"] == "turn" for i in range(3))
    # the default edges follow the batch as it goes: a tool's caller is the turn above it
    r = ok(client.post(f"/sessions/{sid}/nodes/batch", json={"nodes": [
        {"role": "assistant", "output": "One more."}, {"role": "tool", "name": "ls"},
        {"role": "tool", "name": "pwd"}, {"role": "user", "input": "ok"},
    ]}), 201)  # fmt: skip
    turn, ls, pwd, user = r["node_ids"]
    dag = {n["node_id"]: n for n in ok(client.get(f"/sessions/{sid}/dag"))["nodes"]}
    assert dag[ls]["parent"] == dag[pwd]["parent"] == turn and dag[user]["parent"] == pwd


def test_a_batch_with_one_bad_node_stores_nothing(client: TestClient) -> None:
    sid = start(client)
    append(client, sid, "user", "hi", node_id="bq")
    path = f"/sessions/{sid}/nodes/batch"
    good = {"role": "assistant", "node_id": "ba", "output": "calling"}
    cases: list[tuple[list[dict[str, Any]], int, str]] = [
        ([good, {"role": "tool", "caller": "nope"}], 404, "node_not_found"),
        ([good, {"role": "tool", "caller": "bq"}], 422, "invalid_edge"),
        ([good, {"role": "user", "node_id": "ba"}], 409, "duplicate_node"),
        ([good, {"role": "robot"}], 422, "invalid_command"),
        ([good, {"output": "no role"}], 422, "invalid_command"),
        ([good, {"role": "user", "kind": "retry"}], 422, "invalid_command"),
        ([good, {"sibling_of": "ba", "predecessor": "bq"}], 422, "invalid_command"),
        ([good, {"sibling_of": "ba", "output": "no kind"}], 422, "invalid_command"),
    ]
    for nodes, status, code in cases:
        err = refused(client, sid, path, status, code, {"nodes": nodes})
        assert err["details"]["index"] == 1 and err["message"].startswith("nodes[1]: "), err
    refused(client, sid, path, 422, "invalid_request", {"nodes": []})
    refused(client, sid, path, 422, "invalid_request", {"nodes": [{"role": "user", "x": 1}]})
    refused(client, sid, path, 409, "stale_version", {"nodes": [good], "expected_version": 1})
    assert "ba" not in {n["node_id"] for n in ok(client.get(f"/sessions/{sid}/dag"))["nodes"]}


def test_a_batch_may_record_versions_of_its_own_nodes(client: TestClient) -> None:
    """Three samples of one prompt (``n=3``): a turn and two retries, one round trip."""
    sid = start(client)
    append(client, sid, "user", "Name a colour.")
    r = ok(client.post(f"/sessions/{sid}/nodes/batch", json={"nodes": [
        {"role": "assistant", "node_id": "s1", "output": "Red."},
        {"sibling_of": "s1", "kind": "retry", "node_id": "s2", "output": "Blue."},
        {"sibling_of": "s1", "kind": "retry", "role": "assistant", "output": "Green."},
    ]}), 201)  # fmt: skip
    assert r["node_ids"][:2] == ["s1", "s2"]
    dag = {n["node_id"]: n for n in ok(client.get(f"/sessions/{sid}/dag"))["nodes"]}
    assert dag["s2"]["version_kind"] == "retry" and dag["s1"]["versions"] == 3


def test_auto_compaction_runs_once_after_a_batch(client: TestClient) -> None:
    sid = start(client, model="local:tiny")
    # past compact_at (92% of the history budget) but within the window: a summary is due
    nodes = [{"role": "user" if i % 2 == 0 else "assistant", "output": "word " * 150 + str(i)}
             for i in range(44)]  # fmt: skip
    r = ok(client.post(f"/sessions/{sid}/nodes/batch", json={"nodes": nodes}), 201)
    kinds = types(client, sid)
    assert kinds.count("NodeAppended") == 44 and kinds.count("SummaryRecorded") >= 1
    # every summary comes after the whole batch, and the answer's version is the last one
    assert kinds.index("SummaryRecorded") > max(i for i, k in enumerate(kinds)
                                                if k == "NodeAppended")  # fmt: skip
    assert r["version"] == len(kinds)


def test_render_returns_the_head_node_and_the_version(world: World) -> None:
    c, s = world.client, world.sid
    for shape in ("neutral", "openai", "anthropic"):
        r = ok(c.get(f"/sessions/{s}/render", params={"shape": shape}))
        assert r["head_node_id"] == "a4" and r["version"] == world.version
    ok(c.post(f"/sessions/{s}/usage", json={"request_id": "r", "input_tokens": 5}), 201)
    again = ok(c.get(f"/sessions/{s}/render"))
    assert again["version"] == world.version and again["head_node_id"] == "a4"
    old = again["commit_id"]
    append(c, s, "user", "next?", node_id="nx")
    r = ok(c.get(f"/sessions/{s}/render"))
    assert r["head_node_id"] == "nx" and r["commit_id"] != old
    pinned = ok(c.get(f"/sessions/{s}/render", params={"commit": old}))
    assert pinned["head_node_id"] == "a4" and pinned["version"] == world.version


def test_sessions_page_with_a_cursor(client: TestClient) -> None:
    made = [start(client, title=f"s{i}", at=f"2026-01-01T00:00:0{i % 3}+00:00")
            for i in range(7)]  # fmt: skip
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3, **({"after": cursor} if cursor else {})}
        page = ok(client.get("/sessions", params=params))
        seen += [row["session_id"] for row in page["sessions"]]
        pages += 1
        cursor = page["next"]
        if cursor is None:
            break
        start(client, title="late")  # started while paging: sorts after, never skipped
    everything = ok(client.get("/sessions", params={"limit": 1000}))
    assert everything["next"] is None
    assert seen == [row["session_id"] for row in everything["sessions"]]
    assert set(made) <= set(seen) and pages >= 3 and len(seen) == len(set(seen))
    for bad in ("nonsense!", "bm90LWEtY3Vyc29y", ""):
        r = client.get("/sessions", params={"after": bad})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", bad
    for limit in (0, 1001):
        assert client.get("/sessions", params={"limit": limit}).status_code == 422


def test_events_next_is_the_cursor_of_the_following_page(world: World) -> None:
    c, s = world.client, world.sid
    seen: list[int] = []
    after: Any = 0
    while after is not None:
        page = ok(c.get(f"/sessions/{s}/events", params={"after": after, "limit": 4}))
        seen += [e["seq"] for e in page["events"]]
        after = page["next"]
        assert (after is None) == (not page["has_more"])
    assert seen == list(range(1, world.version + 1))


def test_branch_nodes_with_their_content(client: TestClient) -> None:
    sid = start(client)
    append(client, sid, "user", input="q", node_id="n1", metadata={"k": 1})
    ok(client.post(f"/sessions/{sid}/nodes/batch", json={"nodes": [
        {"role": "assistant", "node_id": "n2", "output": "calling"},
        {"role": "tool", "node_id": "n3", "name": "f", "call_id": "c1", "input": {"a": 1}},
        {"role": "tool", "node_id": "n4", "name": "f", "call_id": "c1", "input": {"a": 1},
         "output": "result", "caller": "n2"},
        {"role": "assistant", "node_id": "n5", "output": "done"},
    ]}), 201)  # fmt: skip
    ok(client.post(f"/sessions/{sid}/nodes/n5/edit", json={"output": "other", "node_id": "n6"}),
       201)  # fmt: skip
    branch = ok(client.get(f"/sessions/{sid}/nodes"))
    assert branch["head"] == "n6"
    assert [n["node_id"] for n in branch["nodes"]] == ["n1", "n2", "n3", "n4", "n6"]
    first = branch["nodes"][0]
    assert (first["input"], first["metadata"], first["role"]) == ("q", {"k": 1}, "user")
    assert [n["output"] for n in branch["nodes"][2:4]] == [None, "result"]
    at_n3 = ok(client.get(f"/sessions/{sid}/nodes", params={"head": "n3"}))
    assert [n["node_id"] for n in at_n3["nodes"]] == ["n1", "n2", "n3"]
    r = client.get(f"/sessions/{sid}/nodes", params={"head": "nope"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "node_not_found"
    empty = start(client)
    assert ok(client.get(f"/sessions/{empty}/nodes")) == {"session_id": empty, "version": 1,
                                                          "head": None, "nodes": []}  # fmt: skip
