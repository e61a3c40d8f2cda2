"""The error envelope: every failure is ``{"error": {code, message, details}}``
with the right status, and never leaks a traceback."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

import service.runtime as runtime_module
from api.app import ENDPOINTS, create_app
from domain.summarizer import OpenAICompatibleSummarizer
from tests.api.conftest import JSON, LOCAL


@pytest.fixture
def sid(client: TestClient) -> str:
    r = client.post("/sessions", json={"title": "t"})
    s = r.json()["session_id"]
    for i, role in enumerate(["user", "assistant"]):
        node = {"role": role, "output": f"m{i}", "node_id": f"n{i}"}
        assert client.post(f"/sessions/{s}/nodes", json=node).status_code == 201
    return s


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    return body["error"]


# ------------------------------------------------------------------ routing


@pytest.mark.parametrize("path", ["/", "/nope", "/sessions/x/nope", "/sessions/x/nodes/y/z"])
def test_unknown_route(client: TestClient, path: str) -> None:
    for method in ("GET", "POST"):
        err = error_of(client.request(method, path), 404, "not_found")
        assert path in err["message"]


@pytest.mark.parametrize(
    "method,path",
    [("PUT", "/sessions"), ("DELETE", "/sessions"), ("PUT", "/sessions/x/nodes"),
     ("PUT", "/sessions/x/checkout"), ("POST", "/sessions/x/dag"), ("POST", "/health"),
     ("PATCH", "/sessions/x/nodes/y/retry")],
)  # fmt: skip
def test_wrong_method(client: TestClient, method: str, path: str) -> None:
    r = client.request(method, path)
    error_of(r, 405, "method_not_allowed")
    assert r.headers["allow"]


def test_unexpected_exception_is_a_bare_500(runtime: Any) -> None:
    app = create_app(runtime)

    async def boom(request: Request) -> Response:
        raise RuntimeError("secret at /etc/ctxstore/password")

    app.router.routes.append(Route("/boom", boom))
    with TestClient(app, raise_server_exceptions=False, base_url=LOCAL) as c:
        r = c.get("/boom")
    err = error_of(r, 500, "internal")
    assert err["details"] == {}
    assert "secret" not in r.text and "Traceback" not in r.text and "RuntimeError" not in r.text


def test_a_client_gone_mid_body_is_no_server_error(
    client: TestClient, sid: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that hangs up before its body is in stores nothing, and is not logged as
    an exception in the application (uvicorn's "Exception in ASGI application")."""
    app = client.app
    scope = {"type": "http", "method": "POST", "path": f"/sessions/{sid}/nodes",
             "raw_path": f"/sessions/{sid}/nodes".encode(), "query_string": b"",
             "root_path": "", "scheme": "http", "http_version": "1.1",
             "server": ("localhost", 80), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                         (b"content-length", b"1000")]}  # fmt: skip
    arriving = [{"type": "http.request", "body": b'{"role": "user", ', "more_body": True},
                {"type": "http.disconnect"}]  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return arriving.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))  # raises nothing
    assert sent[0]["status"] == 400
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert len(client.get(f"/sessions/{sid}/dag").json()["nodes"]) == 2


def test_a_busy_database_is_a_retryable_503(runtime: Any, sid: str) -> None:
    """A lock held past the timeout is weather: 503 with Retry-After, not a bare 500."""
    from sqlalchemy.exc import OperationalError

    def locked(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("SELECT", {}, Exception("database is locked"))

    original = runtime.timeline
    runtime.timeline = locked
    try:
        with TestClient(create_app(runtime), raise_server_exceptions=False,
                        base_url=LOCAL) as c:  # fmt: skip
            r = c.get(f"/sessions/{sid}/timeline")
    finally:
        runtime.timeline = original
    error_of(r, 503, "database_unavailable")
    assert r.headers["retry-after"] == "1" and "locked" not in r.text


# --------------------------------------------------------------- validation


def test_validation_details_are_the_pydantic_errors(client: TestClient, sid: str) -> None:
    r = client.post(f"/sessions/{sid}/usage", json={"input_tokens": "3", "extra": 1})
    err = error_of(r, 422, "invalid_request")
    by_loc = {tuple(e["loc"]): e["type"] for e in err["details"]["errors"]}
    assert by_loc == {("request_id",): "missing", ("input_tokens",): "int_type",
                      ("extra",): "extra_forbidden"}  # fmt: skip
    assert "and 2 more" in err["message"]
    json.dumps(err)  # JSON-safe all the way down


def test_malformed_json_says_where(client: TestClient, sid: str) -> None:
    r = client.post(f"/sessions/{sid}/nodes", content=b'{"role": "user", }', headers=JSON)
    err = error_of(r, 400, "malformed_json")
    assert "JSON" in err["message"]


def test_nan_in_a_node_is_refused_not_stored(client: TestClient, sid: str) -> None:
    """Python's JSON reader takes NaN; it is not JSON, and would break every render."""
    before = client.get(f"/sessions/{sid}/events").json()
    body = b'{"role": "tool", "name": "t", "input": {"x": NaN}, "output": "o"}'
    r = client.post(f"/sessions/{sid}/nodes", content=body, headers=JSON)
    err = error_of(r, 422, "invalid_command")
    assert "not JSON" in err["message"]
    assert client.get(f"/sessions/{sid}/events").json() == before
    assert client.get(f"/sessions/{sid}/render").status_code == 200


def test_empty_body_is_an_empty_object(client: TestClient, sid: str) -> None:
    err = error_of(client.post(f"/sessions/{sid}/nodes", headers=JSON), 422, "invalid_request")
    assert err["details"]["errors"][0]["loc"] == ["role"]
    assert client.post(f"/sessions/{sid}/runs/start", headers=JSON).status_code == 201


QUERY_ROUTES = [
    "/events", "/dag", "/context", "/commits/c1", "/render", "/timeline", "/explain/n0",
    "/occupancy", "/budget", "/stream?once=1",
]  # fmt: skip


@pytest.mark.parametrize("path", QUERY_ROUTES)
@pytest.mark.parametrize("session", [str(uuid.UUID(int=3)), "not-a-uuid"])
def test_queries_on_an_unknown_session(client: TestClient, path: str, session: str) -> None:
    error_of(client.get(f"/sessions/{session}{path}"), 404, "session_not_found")


@pytest.mark.parametrize(
    "path,params",
    [("/events", {"limit": "0"}), ("/events", {"limit": "1001"}), ("/events", {"after": "-1"}),
     ("/events", {"limit": "ten"}), ("/events", {"page": "2"}), ("/render", {"shape": "xml"}),
     ("/dag", {"full": "1"}), ("/stream", {"interval": "0"}), ("/stream", {"once": "maybe"})],
)  # fmt: skip
def test_bad_query_strings(client: TestClient, sid: str, path: str,
                           params: dict[str, str]) -> None:  # fmt: skip
    err = error_of(client.get(f"/sessions/{sid}{path}", params=params), 422, "invalid_request")
    assert err["details"]["errors"]


def test_unknown_commit_and_node(client: TestClient, sid: str) -> None:
    error_of(client.get(f"/sessions/{sid}/commits/nope"), 404, "not_found")
    error_of(client.get(f"/sessions/{sid}/render", params={"commit": "nope"}), 404, "not_found")
    error_of(client.get(f"/sessions/{sid}/explain/nope"), 404, "node_not_found")


def test_a_commit_of_another_session_is_not_found(client: TestClient, sid: str) -> None:
    other = client.post("/sessions", json={}).json()["session_id"]
    client.post(f"/sessions/{other}/nodes", json={"role": "user", "output": "x"})
    foreign = client.get(f"/sessions/{other}/context").json()["id"]
    error_of(client.get(f"/sessions/{sid}/commits/{foreign}"), 404, "not_found")


def test_context_of_an_empty_session(client: TestClient) -> None:
    empty = client.post("/sessions", json={}).json()["session_id"]
    error_of(client.get(f"/sessions/{empty}/context"), 404, "not_found")
    error_of(client.get(f"/sessions/{empty}/render"), 404, "not_found")


def test_domain_error_details_are_json(client: TestClient, sid: str) -> None:
    r = client.post(f"/sessions/{sid}/pin", json={"node_id": "n0", "expected_version": 1})
    err = error_of(r, 409, "stale_version")
    assert err["details"] == {"expected": 1, "actual": 3}
    assert "version 3" in err["message"]


def test_summarizer_failure_is_502_and_stores_nothing(store_url: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]  # closed again: nothing listens there
    summarizer = OpenAICompatibleSummarizer(f"http://127.0.0.1:{dead}", "m", timeout=2)
    rt = runtime_module.Runtime(store_url, summarizer=summarizer, auto_compact=False)
    try:
        with TestClient(create_app(rt), base_url=LOCAL) as c:
            s = c.post("/sessions", json={}).json()["session_id"]
            for i in range(5):
                for role in ("user", "assistant"):
                    c.post(f"/sessions/{s}/nodes", json={"role": role, "output": f"{role} {i}"})
            before = c.get(f"/sessions/{s}/events", params={"limit": 1000}).json()
            err = error_of(c.post(f"/sessions/{s}/compact", json={}), 502, "summarizer_failed")
            assert str(dead) in err["message"]
            assert c.get(f"/sessions/{s}/events", params={"limit": 1000}).json() == before
    finally:
        rt.close()


# ------------------------------------------------------------------ openapi


def test_openapi_lists_every_route_with_its_schema(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    for ep in ENDPOINTS:
        op = doc["paths"][ep.path][ep.method.lower()]
        assert op["summary"] and str(ep.status) in op["responses"]
        if ep.body is not None:
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
            assert schema["additionalProperties"] is False
            assert "400" in op["responses"] and "422" in op["responses"]
    append = doc["components"]["schemas"]["AppendNode"]
    assert append["required"] == ["role"] and "expected_version" in append["properties"]
    assert "#/$defs/" not in json.dumps(doc)
    merge_peers = doc["components"]["schemas"]["Merge"]["properties"]["peers"]
    assert merge_peers["items"]["$ref"] == "#/components/schemas/Peer"
    params = {p["name"] for p in doc["paths"]["/sessions/{sid}/events"]["get"]["parameters"]}
    assert params == {"sid", "after", "limit"}


def test_every_response_is_typed_and_open_to_new_fields(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    for ep in ENDPOINTS:
        op = doc["paths"][ep.path][ep.method.lower()]
        content = op["responses"][str(ep.status)]["content"][ep.media_type]["schema"]
        ref = content["$ref"].rsplit("/", 1)[1]
        assert schemas[ref]["type"] == "object" and schemas[ref]["properties"], ref
        assert schemas[ref]["additionalProperties"] is True, ref
        assert "503" in op["responses"]
    assert schemas["Occupancy"]["properties"]["total_used"]["type"] == "integer"
    assert schemas["Commit"]["properties"]["items"]["items"]["$ref"].endswith("/Item")
