"""Browser safety: commands must say JSON, the Host must be one served, CORS only for
configured origins."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from api.app import create_app
from api.browser_safety import BrowserSafety, host_of
from tests.api.conftest import LOCAL
from tests.api.test_commands import ok, stored

SIMPLE_TYPES = [None, "text/plain", "text/plain; charset=utf-8",
                "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                "application/jsonp"]  # fmt: skip


@pytest.mark.parametrize("content_type", SIMPLE_TYPES)
def test_a_command_not_declared_json_is_refused_with_415(
    client: TestClient, content_type: str | None
) -> None:
    """What a cross-site page can send without a preflight never runs."""
    sid = ok(client.post("/sessions", json={}), 201)["session_id"]
    before = stored(client, sid)
    headers = {} if content_type is None else {"content-type": content_type}
    for path, body in ((f"/sessions/{sid}/nodes", b'{"role": "user", "output": "hi"}'),
                       (f"/sessions/{sid}/runs/start", b""), ("/sessions", b"{}")):  # fmt: skip
        r = client.post(path, content=body, headers=headers)
        assert r.status_code == 415, r.text
        assert r.json()["error"]["code"] == "unsupported_media_type"
    assert stored(client, sid) == before


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON",
                                          "application/merge-patch+json"])  # fmt: skip
def test_json_content_types_are_taken(client: TestClient, content_type: str) -> None:
    r = client.post("/sessions", content=b'{"title": "t"}', headers={"content-type": content_type})
    assert r.status_code == 201, r.text


def _client(runtime: Any, base_url: str = LOCAL, **settings: Any) -> TestClient:
    return TestClient(create_app(runtime, browser=BrowserSafety(**settings)), base_url=base_url)


@pytest.mark.parametrize("host", ["evil.example", "localhost.evil.example", "attacker.test:8000"])
def test_a_host_not_served_is_refused(runtime: Any, host: str) -> None:
    """DNS rebinding: a hostile name pointed at 127.0.0.1 reaches the server with its own Host."""
    with _client(runtime, base_url=f"http://{host}") as c:
        for r in (c.get("/health"), c.post("/sessions", json={})):
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "bad_host"
        assert c.get("/health", headers={"host": "localhost:8000"}).status_code == 200
    assert runtime.sessions() == []


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:9", "[::1]:8000",
                                  "192.168.1.20", "[fe80::1]", "box.lan:8000"])  # fmt: skip
def test_default_hosts_are_loopback_the_bound_host_and_addresses(runtime: Any, host: str) -> None:
    with _client(runtime, bind_host="box.lan") as c:
        assert c.get("/health", headers={"host": host}).status_code == 200


def test_configured_hosts_replace_the_default(runtime: Any) -> None:
    with _client(runtime, allowed_hosts=("ctx.example.com", "*.internal")) as c:
        expected = {"ctx.example.com": 200, "a.b.internal": 200, "localhost": 400,
                    "127.0.0.1": 400, "example.com": 400}  # fmt: skip
        for host, status in expected.items():
            assert c.get("/health", headers={"host": host}).status_code == status, host


def _preflight(c: TestClient, origin: str) -> Any:
    return c.options("/sessions", headers={
        "origin": origin, "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, authorization"})  # fmt: skip


def test_cors_preflight_passes_only_for_configured_origins(runtime: Any) -> None:
    with _client(runtime, cors_origins=("https://app.example",)) as c:
        ok_ = _preflight(c, "https://app.example")
        assert ok_.status_code == 200
        assert ok_.headers["access-control-allow-origin"] == "https://app.example"
        assert "POST" in ok_.headers["access-control-allow-methods"]
        refused = _preflight(c, "https://evil.example")
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers
        r = c.post("/sessions", json={}, headers={"origin": "https://app.example"})
        assert r.status_code == 201
        assert r.headers["access-control-allow-origin"] == "https://app.example"
    with _client(runtime) as c:  # the default: no origin at all
        assert _preflight(c, "https://app.example").status_code == 400


def test_host_of_strips_port_and_brackets() -> None:
    assert host_of("LocalHost:80") == "localhost"
    assert host_of("[::1]:8000") == "::1" and host_of("::1") == "::1"
    assert host_of("") is None and host_of("[") is None
