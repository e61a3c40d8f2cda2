"""GET /sessions: the list a client picks a session from."""

from __future__ import annotations

from starlette.testclient import TestClient

from tests.api.test_commands import append, ok, start


def test_lists_every_session_oldest_first_with_its_head(client: TestClient) -> None:
    assert ok(client.get("/sessions")) == {"sessions": [], "next": None}
    first = start(client, title="first")
    node = append(client, first, "user", input="hi")
    second = start(client, title="second", model="anthropic:claude-sonnet-4")
    listed = ok(client.get("/sessions"))["sessions"]
    assert [s["session_id"] for s in listed] == [first, second]
    assert listed[0]["head"] == node and listed[0]["version"] == 2
    assert listed[1]["model"] == "anthropic:claude-sonnet-4" and listed[1]["head"] is None


def test_refuses_query_parameters(client: TestClient) -> None:
    response = client.get("/sessions", params={"page": 2})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
