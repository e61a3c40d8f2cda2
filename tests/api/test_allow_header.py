"""A 405 names every method the path serves (RFC 9110 15.5.6), not one route's."""

from __future__ import annotations

from starlette.testclient import TestClient


def test_a_405_allows_every_method_of_the_path(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["session_id"]
    cases = {
        "/sessions": "GET, HEAD, POST",
        f"/sessions/{sid}": "GET, HEAD, DELETE",
        f"/sessions/{sid}/nodes": "GET, HEAD, POST",
    }
    for path, allow in cases.items():
        answer = client.request("OPTIONS", path)
        assert answer.status_code == 405, path
        assert answer.headers["allow"] == allow, path
        assert answer.json()["error"]["code"] == "method_not_allowed"
    assert client.put(f"/sessions/{sid}").headers["allow"] == "GET, HEAD, DELETE"
