"""A command's answer tells the truth (issue 13, findings 1, 4 and 7).

Once a command's events are stored its answer is a success; a follow-up
that failed (auto-compaction, catch-up) is named in ``follow_up``.  Errors
never quote the summarizer's credentials or what its server answered.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

import service.runtime as runtime_module
from api.app import create_app
from domain.summarizer import OpenAICompatibleSummarizer
from tests.conftest import immediate_policy


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: nothing listens there


@pytest.fixture
def served(store_url: str) -> Iterator[Any]:
    """``served(summarizer)``: a test client over a Runtime using that summarizer."""
    opened: list[Any] = []

    def make(summarizer: Any, auto_compact: bool = True) -> TestClient:
        rt = runtime_module.Runtime(
            store_url, summarizer=summarizer, policy=immediate_policy(), auto_compact=auto_compact
        )
        client = TestClient(create_app(rt))
        opened.append((rt, client))
        return client

    yield make
    for rt, client in opened:
        client.close()
        rt.close()


def _nodes(client: TestClient, sid: str) -> list[dict[str, Any]]:
    answer = client.get(f"/sessions/{sid}/nodes")
    assert answer.status_code == 200, answer.text
    nodes: list[dict[str, Any]] = answer.json()["nodes"]
    return nodes


def test_a_failing_summarizer_never_turns_a_stored_append_into_an_error(served: Any) -> None:
    """The issue's repro: from the 9th node every append answered 502 yet was stored."""
    dead = _dead_port()
    client = served(OpenAICompatibleSummarizer(f"http://127.0.0.1:{dead}", "m", timeout=2))
    sid = client.post("/sessions", json={"context_window": 256}).json()["session_id"]
    answers = []
    for i in range(14):
        role = "user" if i % 2 == 0 else "assistant"
        answer = client.post(
            f"/sessions/{sid}/nodes",
            json={"role": role, "output": f"{role} turn {i} " + "words " * 12},
        )
        assert answer.status_code == 201, answer.text
        answers.append(answer.json())
    failed = [a["follow_up"]["compaction"]["error"] for a in answers if "follow_up" in a]
    assert failed and all(f["code"] == "summarizer_failed" for f in failed)
    assert len(_nodes(client, sid)) == 14  # each stored exactly once
    last = answers[-1]
    assert last["version"] == client.get(f"/sessions/{sid}").json()["version"]


class _Blocking:
    """A summarizer that waits until released: a hung upstream."""

    name = "blocking"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def summarize(self, items: list[dict[str, Any]]) -> str:
        self.entered.set()
        self.release.wait(60)
        return "a summary"


def test_a_hung_summarizer_stalls_no_other_session(served: Any) -> None:
    summarizer = _Blocking()
    client = served(summarizer, auto_compact=False)
    slow = client.post("/sessions", json={}).json()["session_id"]
    other = client.post("/sessions", json={}).json()["session_id"]
    for i in range(10):
        client.post(
            f"/sessions/{slow}/nodes",
            json={"role": "user" if i % 2 == 0 else "assistant", "output": f"turn {i}"},
        )
    compacting = threading.Thread(
        target=client.post, args=(f"/sessions/{slow}/compact",), kwargs={"json": {}}
    )
    compacting.start()
    try:
        assert summarizer.entered.wait(30), "compaction never called the summarizer"
        answers: list[Any] = []
        appending = threading.Thread(
            target=lambda: answers.append(
                client.post(f"/sessions/{other}/nodes", json={"role": "user", "output": "hi"})
            )
        )
        appending.start()
        appending.join(30)
        # still held: the other session's append did not wait for it
        assert not summarizer.release.is_set() and answers, "the append waited for the summarizer"
        assert answers[0].status_code == 201
    finally:
        summarizer.release.set()
        compacting.join(60)


class _Upstream(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = b'{"error": "UPSTREAM-SAYS-account 42 over quota, key sk-live-XYZ"}'
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _compaction_error(client: TestClient) -> dict[str, Any]:
    sid = client.post("/sessions", json={}).json()["session_id"]
    for i in range(10):
        client.post(
            f"/sessions/{sid}/nodes",
            json={"role": "user" if i % 2 == 0 else "assistant", "output": f"turn {i}"},
        )
    answer = client.post(f"/sessions/{sid}/compact", json={})
    assert answer.status_code == 502, answer.text
    error: dict[str, Any] = answer.json()["error"]
    return error


def test_errors_never_echo_summarizer_credentials(served: Any) -> None:
    dead = _dead_port()
    url = f"http://alice:hunter2-secret@127.0.0.1:{dead}/v1?api_key=query-secret"
    error = _compaction_error(served(OpenAICompatibleSummarizer(url, "m", timeout=2)))
    text = json.dumps(error)
    assert error["code"] == "summarizer_failed"
    assert "hunter2" not in text and "query-secret" not in text and "alice" not in text


def test_errors_never_relay_an_upstream_body(served: Any) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        error = _compaction_error(
            served(OpenAICompatibleSummarizer(f"http://127.0.0.1:{port}", "m", timeout=5))
        )
        text = json.dumps(error)
        assert "500" in error["message"]
        assert "UPSTREAM-SAYS" not in text and "sk-live" not in text
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------ finding 7


def test_duplicate_json_keys_are_refused(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["session_id"]
    raw = b'{"role": "user", "output": "a", "output": "b"}'
    answer = client.post(
        f"/sessions/{sid}/nodes", content=raw, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "duplicate_key"
    nested = b'{"role": "user", "metadata": {"k": 1, "k": 2}}'
    answer = client.post(
        f"/sessions/{sid}/nodes", content=nested, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "duplicate_key"
    assert _nodes(client, sid) == []


@pytest.mark.parametrize(
    "at", ["1969-12-31T23:59:59+00:00", "2201-01-01T00:00:00+00:00", "9999-01-01T00:00:00+00:00"]
)
def test_times_outside_a_sane_range_are_refused(client: TestClient, at: str) -> None:
    sid = client.post("/sessions", json={}).json()["session_id"]
    answer = client.post(f"/sessions/{sid}/nodes", json={"role": "user", "at": at})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_request"
    assert client.post("/sessions", json={"at": at}).status_code == 422


def test_times_inside_the_range_are_kept(client: TestClient) -> None:
    sid = client.post("/sessions", json={"at": "1970-01-02T00:00:00+00:00"}).json()["session_id"]
    answer = client.post(
        f"/sessions/{sid}/nodes", json={"role": "user", "at": "2199-12-31T00:00:00+00:00"}
    )
    assert answer.status_code == 201, answer.text


def test_the_openapi_document_allows_no_value_the_server_refuses(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]

    def window(name: str) -> dict[str, Any]:
        prop = schemas[name]["properties"]["context_window"]
        found: dict[str, Any] = next(s for s in prop["anyOf"] if s.get("type") == "integer")
        return found

    for name in ("StartSession", "SwitchModel"):
        assert window(name)["minimum"] == 256 and window(name)["maximum"] == 100_000_000
        model = schemas[name]["properties"]["model"]
        assert model["minLength"] >= 3 and model["pattern"].startswith("^")
    assert schemas["NodeRef"]["properties"]["node_id"]["minLength"] == 1
    assert schemas["Usage"]["properties"]["request_id"]["minLength"] == 1
    # a window the document allows is accepted; one it refuses is refused by the server too
    assert client.post("/sessions", json={"context_window": 256}).status_code == 201
    assert client.post("/sessions", json={"context_window": 255}).status_code == 422
