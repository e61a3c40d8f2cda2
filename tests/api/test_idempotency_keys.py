"""``Idempotency-Key`` on every POST: a retry returns the first answer and stores nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from api.app import create_app
from projections.rebuild import rebuild_and_compare


def _key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


def _events(client: TestClient, sid: str) -> list[Any]:
    answer = client.get(f"/sessions/{sid}/events", params={"limit": 1000}).json()
    events: list[Any] = answer["events"]
    return events


def test_a_retry_returns_the_first_answer_and_stores_nothing(
    client: TestClient, store_url: str
) -> None:
    first = client.post("/sessions", json={"title": "t"}, headers=_key("start-1"))
    again = client.post("/sessions", json={"title": "t"}, headers=_key("start-1"))
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    sid = first.json()["session_id"]
    assert len([s for s in client.get("/sessions").json()["sessions"]]) == 1
    body = {"role": "user", "output": "hello"}
    answers = [
        client.post(f"/sessions/{sid}/nodes", json=body, headers=_key("append-1")) for _ in range(3)
    ]
    assert {a.status_code for a in answers} == {201}
    assert len({a.content for a in answers}) == 1
    assert len(client.get(f"/sessions/{sid}/nodes").json()["nodes"]) == 1
    before = _events(client, sid)
    batch = {"nodes": [{"role": "assistant", "output": "a"}, {"role": "user", "output": "b"}]}
    once = client.post(f"/sessions/{sid}/nodes/batch", json=batch, headers=_key("batch-1"))
    twice = client.post(f"/sessions/{sid}/nodes/batch", json=batch, headers=_key("batch-1"))
    assert once.status_code == twice.status_code == 201 and once.content == twice.content
    assert len(_events(client, sid)) == len(before) + 2
    assert rebuild_and_compare(store_url)["identical"]  # the claims are skipped alike


def test_a_key_with_another_body_is_refused(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["session_id"]
    assert (
        client.post(
            f"/sessions/{sid}/nodes", json={"role": "user", "output": "a"}, headers=_key("k")
        ).status_code
        == 201
    )
    reused = client.post(
        f"/sessions/{sid}/nodes", json={"role": "user", "output": "b"}, headers=_key("k")
    )
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    other_route = client.post(f"/sessions/{sid}/runs/start", json={}, headers=_key("k"))
    assert other_route.status_code == 422
    assert len(client.get(f"/sessions/{sid}/nodes").json()["nodes"]) == 1


@pytest.mark.parametrize("key", [b"", b"x" * 256, "naïve".encode()])
def test_a_malformed_key_is_refused(client: TestClient, key: bytes) -> None:
    answer = client.post("/sessions", json={}, headers={"Idempotency-Key": key})  # type: ignore[dict-item]
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_idempotency_key"
    assert client.get("/sessions").json()["sessions"] == []


def test_a_refused_command_is_not_remembered(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["session_id"]
    finish = client.post(f"/sessions/{sid}/runs/finish", json={}, headers=_key("f"))
    assert finish.status_code == 409  # no run started: nothing stored
    client.post(f"/sessions/{sid}/runs/start", json={})
    assert (
        client.post(f"/sessions/{sid}/runs/finish", json={}, headers=_key("f")).status_code == 200
    )


def test_every_command_route_takes_a_key(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["session_id"]
    for i in range(10):
        client.post(
            f"/sessions/{sid}/nodes",
            json={"role": "user" if i % 2 == 0 else "assistant", "output": f"t{i}"},
        )
    nid = client.get(f"/sessions/{sid}/nodes").json()["nodes"][-1]["node_id"]
    calls = [
        (f"/sessions/{sid}/nodes/{nid}/edit", {"output": "edited"}),
        (f"/sessions/{sid}/pin", {"node_id": nid}),
        (f"/sessions/{sid}/usage", {"request_id": "r1", "input_tokens": 10}),
        (f"/sessions/{sid}/branch", {"node_id": nid}),
        (f"/sessions/{sid}/compact", {}),
        (f"/sessions/{sid}/model", {"model": "local:tiny", "context_window": 4096}),
    ]
    for path, body in calls:
        versions = []
        for _ in range(2):
            answer = client.post(path, json=body, headers=_key(f"route {path}"))
            assert answer.status_code in (200, 201), (path, answer.text)
            versions.append(answer.content)
        assert versions[0] == versions[1], path
    # one of each: the retries stored nothing
    events = _events(client, sid)
    kinds = [e["type"] for e in events]
    for kind in ("SummaryRecorded", "NodePinned", "UsageMeasured", "ModelSwitched"):
        assert kinds.count(kind) == 1, (kind, kinds)
    assert kinds.count("NodeAppended") == 11, kinds  # ten turns and one edit
    assert len(client.get("/sessions").json()["sessions"]) == 2  # and one branch


class _Tenants:
    """Sets the scope key an auth layer sets, from a test header."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            scope["ctxstore_tenant"] = headers.get(b"x-test-tenant", b"").decode()
        await self.app(scope, receive, send)


def test_keys_are_scoped_by_tenant(runtime: Any) -> None:
    with TestClient(_Tenants(create_app(runtime))) as c:
        a = c.post("/sessions", json={}, headers={**_key("same"), "X-Test-Tenant": "a"})
        b = c.post("/sessions", json={}, headers={**_key("same"), "X-Test-Tenant": "b"})
        a2 = c.post("/sessions", json={}, headers={**_key("same"), "X-Test-Tenant": "a"})
        assert a.json()["session_id"] != b.json()["session_id"]
        assert a2.content == a.content
        assert len(c.get("/sessions").json()["sessions"]) == 2


def test_concurrent_retries_store_one_command(runtime: Any) -> None:
    with TestClient(create_app(runtime)) as c:
        sid = c.post("/sessions", json={}).json()["session_id"]
    answers: list[Any] = []
    barrier = threading.Barrier(4)

    def send() -> None:
        client = TestClient(create_app(runtime))
        barrier.wait()
        answers.append(
            client.post(
                f"/sessions/{sid}/nodes",
                json={"role": "user", "output": "x"},
                headers=_key("racing"),
            )
        )

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [a.status_code for a in answers] == [201] * 4, [a.text for a in answers]
    assert len({a.json()["node_id"] for a in answers}) == 1
    with TestClient(create_app(runtime)) as c:
        assert len(c.get(f"/sessions/{sid}/nodes").json()["nodes"]) == 1
