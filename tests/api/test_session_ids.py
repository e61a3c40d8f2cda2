"""Node ids over HTTP: unique in their session, and another session's copy named by key."""

from __future__ import annotations

from urllib.parse import quote

from starlette.testclient import TestClient


def _run(client: TestClient, title: str) -> str:
    """A deterministic agent's turn: every run uses the same node ids."""
    sid: str = client.post("/sessions", json={"title": title}).json()["session_id"]
    for body in (
        {"role": "user", "output": f"task {title}", "node_id": "u"},
        {"role": "assistant", "output": "calling", "node_id": "call_0"},
        {"role": "tool", "name": "ls", "input": {"t": title}, "output": f"files of {title}",
         "node_id": "call_1", "call_id": "call_1"},
    ):  # fmt: skip
        answer = client.post(f"/sessions/{sid}/nodes", json=body)
        assert answer.status_code == 201, answer.text
    return sid


def test_an_attached_copy_is_explained_by_its_qualified_id(client: TestClient) -> None:
    theirs, mine = _run(client, "theirs"), _run(client, "mine")
    attach = client.post(f"/sessions/{mine}/attach", json={"source_session": theirs})
    assert attach.status_code == 201, attach.text
    copied = [i for i in client.get(f"/sessions/{mine}/context").json()["items"]
              if i["attached_from"] and i["role"] == "tool"]  # fmt: skip
    assert [i["source_node_id"] for i in copied] == [f"{theirs}/call_1"]
    # the inspector asks with the id percent-encoded; a client may also send the slash as is
    for path in (quote(f"{theirs}/call_1", safe=""), f"{theirs}/call_1"):
        why = client.get(f"/sessions/{mine}/explain/{path}")
        assert why.status_code == 200, why.text
        assert why.json()["current"]["item_id"] == copied[0]["item_id"]
    own = client.get(f"/sessions/{mine}/explain/call_1").json()
    assert own["current"]["item_id"] == "call_1"
    assert client.get(f"/sessions/{mine}/explain/{theirs}/nope").status_code == 404
    assert "/sessions/{sid}/explain/{nid}" in client.get("/openapi.json").json()["paths"]
