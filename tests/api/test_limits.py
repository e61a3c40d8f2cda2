"""Request limits: body size and read time over a real server, JSON depth, node size,
requests and streams per client; and the stream watcher that replaced per-stream polling."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from api.app import create_app
from api.limits import Limits, json_depth, parsed_depth
from api.principal import client_identity
from api.stream_watcher import StreamWatcher
from tests.api.conftest import LOCAL, serving
from tests.api.test_commands import ok, refused

MB = 1024 * 1024


def _exchange(base: str, head: str, parts: list[bytes]) -> tuple[int, dict[str, str], Any]:
    """Send a request by hand (``head`` then ``parts``, stopping if the server hangs up),
    then read the answer; a server that waits for more than was sent times the test out."""
    url = urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=20) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        try:
            for part in parts:
                sock.sendall(part)
        except OSError:  # refused and closed mid-body: the answer is already there
            pass
        raw = b""
        while b"\r\n\r\n" not in raw or len(raw.split(b"\r\n\r\n", 1)[1]) < _length(raw):
            chunk = sock.recv(65536)
            if not chunk:
                break
            raw += chunk
    lines, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = lines.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, json.loads(body)


def _length(raw: bytes) -> int:
    for line in raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 1 << 30


def _post_head(path: str, **headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return "\n".join(lines) + "\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_a_100_mb_body_is_refused_from_its_content_length_alone(store_url: str) -> None:
    with serving(store_url) as base:
        sid = httpx.post(f"{base}/sessions", json={}).json()["session_id"]
        # Not one byte of the body is sent: only an answer before it can arrive.
        status, _, body = _exchange(
            base, _post_head(f"/sessions/{sid}/nodes", Content_Length=str(100 * MB)), []
        )
        assert (status, body["error"]["code"]) == (413, "body_too_large")
        assert body["error"]["details"]["limit"] == 8 * MB
        assert httpx.get(f"{base}/sessions/{sid}").json()["version"] == 1


def test_a_chunked_body_is_refused_once_it_passes_the_limit(store_url: str) -> None:
    with serving(store_url, CTXSTORE_MAX_BODY_BYTES=str(64 * 1024)) as base:
        sid = httpx.post(f"{base}/sessions", json={}).json()["session_id"]
        start = b'{"role": "user", "output": "' + b"x" * 16_000
        parts = [_chunk(start)] + [_chunk(b"x" * 16_000) for _ in range(6)]  # no last chunk
        head = _post_head(f"/sessions/{sid}/nodes", Transfer_Encoding="chunked")
        status, _, body = _exchange(base, head, parts)
        assert (status, body["error"]["code"]) == (413, "body_too_large")
        assert httpx.get(f"{base}/sessions/{sid}").json()["version"] == 1


def test_a_body_that_trickles_is_cut_off_with_408(store_url: str) -> None:
    with serving(store_url, CTXSTORE_BODY_TIMEOUT="0.5") as base:
        sid = httpx.post(f"{base}/sessions", json={}).json()["session_id"]
        head = _post_head(f"/sessions/{sid}/nodes", Content_Length="100")
        status, _, body = _exchange(base, head, [b'{"role": "us'])  # and then nothing
        assert (status, body["error"]["code"]) == (408, "request_timeout")
        assert httpx.get(f"{base}/sessions/{sid}").json()["version"] == 1


def _nested(depth: int) -> Any:
    value: Any = "leaf [{"
    for _ in range(depth):
        value = [value]
    return value


def test_json_nested_past_the_limit_is_refused(client: TestClient) -> None:
    sid = ok(client.post("/sessions", json={}), 201)["session_id"]
    path = f"/sessions/{sid}/nodes"
    # The body object is one level, so the limit of 64 leaves 63 for the input.
    ok(client.post(path, json={"role": "user", "input": _nested(63)}), 201)
    err = refused(client, sid, path, 400, "json_too_deep", {"role": "user", "input": _nested(64)})
    assert err["details"] == {"limit": 64}
    refused(client, sid, "/sessions", 400, "json_too_deep", content=b"[" * 100 + b"]" * 100)


@pytest.mark.parametrize("raw", [
    b"{}", b"[]", b'"[[["', b'{"a": [1, {"b": [[]]}]}', b'["\\\\", ["\\"]]"]]', b"[[[", b"",
])  # fmt: skip
def test_json_depth_counts_brackets_outside_strings_only(raw: bytes) -> None:
    expected = {b"{}": 1, b"[]": 1, b'"[[["': 0, b'{"a": [1, {"b": [[]]}]}': 5,
                b'["\\\\", ["\\"]]"]]': 2, b"[[[": 3, b"": 0}  # fmt: skip
    assert json_depth(raw) == expected[raw]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_the_depth_of_a_parsed_body_is_the_depth_of_its_bytes(value: Any) -> None:
    """The parsed walk (one parse of the body) agrees with the byte scan it replaced."""
    raw = json.dumps(value).encode()
    assert parsed_depth(json.loads(raw), 1000) == json_depth(raw)
    assert parsed_depth(json.loads(raw), 1) == min(json_depth(raw), 2)


def test_a_node_over_the_content_limit_is_refused(runtime: Any) -> None:
    app = create_app(runtime, limits=Limits(max_node_bytes=1000))
    with TestClient(app, base_url=LOCAL) as client:
        sid = ok(client.post("/sessions", json={}), 201)["session_id"]
        ok(client.post(f"/sessions/{sid}/nodes", json={"role": "user", "output": "y" * 900}), 201)
        big = {"role": "tool", "name": "read", "output": "é" * 600}  # 1,200 bytes as UTF-8
        err = refused(client, sid, f"/sessions/{sid}/nodes", 413, "content_too_large", big)
        assert err["details"]["limit"] == 1000 and err["details"]["size"] > 1000
        batch = {"nodes": [{"role": "user", "output": "ok"}, big]}
        err = refused(client, sid, f"/sessions/{sid}/nodes/batch", 413, "content_too_large", batch)
        assert err["details"]["index"] == 1 and err["message"].startswith("nodes[1]: ")


@contextmanager
def _open_stream(http: httpx.Client, sid: str) -> Iterator[httpx.Response]:
    with http.stream("GET", f"/sessions/{sid}/stream") as r:
        lines = r.iter_lines()  # kept: dropping it would close the connection
        if r.status_code == 200:
            next(lines)  # the first frame is out: the stream holds its slot
        yield r


def _stream_status(http: httpx.Client, sid: str) -> int:
    with _open_stream(http, sid) as r:
        return r.status_code


def _retrying(status: Callable[[], int]) -> int:
    """The status once it is not 429: the server notices a closed stream a moment later."""
    for _ in range(100):
        if (code := status()) != 429:
            return code
        time.sleep(0.1)
    return 429


@contextmanager
def _two_clients(store_url: str, **env: str) -> Iterator[tuple[httpx.Client, httpx.Client, str]]:
    """A server with ``env``, a client, another one (from another loopback address),
    and a session."""
    other_address = httpx.HTTPTransport(local_address="127.0.0.2")
    with (
        serving(store_url, **env) as base,
        httpx.Client(base_url=base, timeout=20) as http,
        httpx.Client(base_url=base, timeout=20, transport=other_address) as other,
    ):
        yield http, other, http.post("/sessions", json={}).json()["session_id"]


def test_streams_per_client_are_capped_with_retry_after(store_url: str) -> None:
    with _two_clients(store_url, CTXSTORE_MAX_STREAMS_PER_CLIENT="2") as (http, other, sid):
        with ExitStack() as streams:
            for _ in range(2):
                assert streams.enter_context(_open_stream(http, sid)).status_code == 200
            with _open_stream(http, sid) as third:
                third.read()
                assert third.status_code == 429 and third.headers["retry-after"] == "5"
                assert third.json()["error"]["code"] == "too_many_streams"
            with _open_stream(other, sid) as theirs:
                assert theirs.status_code == 200
            # once=1 sends the state and closes: it needs no stream slot
            assert http.get(f"/sessions/{sid}/stream", params={"once": "1"}).status_code == 200
        assert _retrying(lambda: _stream_status(http, sid)) == 200  # the slots came back


def test_requests_per_client_are_capped_with_retry_after(store_url: str) -> None:
    with _two_clients(store_url, CTXSTORE_MAX_REQUESTS_PER_CLIENT="2") as (http, other, sid):
        with _open_stream(http, sid), _open_stream(http, sid):  # two requests in flight
            r = http.get("/health")
            assert r.status_code == 429 and r.headers["retry-after"] == "1"
            assert r.json()["error"]["code"] == "too_many_requests"
            assert other.get("/health").status_code == 200
        assert _retrying(lambda: http.get("/health").status_code) == 200


def test_the_client_is_its_key_when_authenticated_else_its_host() -> None:
    assert client_identity({"client": ("10.0.0.7", 5555)}) == "10.0.0.7"
    assert client_identity({"client": ("10.0.0.7", 5555), "ctxstore_key_id": "k1"}) == "k1"
    assert client_identity({}) == "unknown"


def test_the_watcher_wakes_only_the_streams_of_changed_sessions(runtime: Any) -> None:
    a = runtime.execute("start_session", title="a")[0]
    b = runtime.execute("start_session", title="b")[0]

    async def scenario() -> None:
        watcher = StreamWatcher(runtime, 0.01)
        wake_a, wake_b = watcher.subscribe(str(a)), watcher.subscribe(str(b))
        await asyncio.wait_for(wake_a.wait(), 10)  # a new watcher wakes everyone once
        wake_a.clear(), wake_b.clear()
        await asyncio.to_thread(runtime.execute, "append_node", a, role="user", output="hi")
        await asyncio.wait_for(wake_a.wait(), 10)
        assert not wake_b.is_set()
        watcher.unsubscribe(str(a), wake_a), watcher.unsubscribe(str(b), wake_b)
        assert watcher._task is not None
        await asyncio.wait_for(watcher._task, 10)  # nothing waits: the watcher stops

    asyncio.run(scenario())
