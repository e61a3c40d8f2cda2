"""Large bodies go to a helper process (``api.large_body_lane``, ``api.helper_server``).

Over a real server on PostgreSQL: what the helper stores is read back from the
API process at once, a retry by key stores nothing, the limits and the API key
are still the API process's, a principal a client claims is ignored, and a
dead helper is replaced while its requests are served in the process.  In
process, on both stores: a helper that is not there, or fails mid-request.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine
from starlette.testclient import TestClient

from api import auth
from api.app import create_app
from api.helper_server import DEFAULT_THRESHOLD, lane_threshold
from api.large_body_lane import Lane
from domain.store_config import sqlalchemy_url
from service.api_keys import KeyStore
from tests.api.conftest import JSON, LOCAL, serving

LANE = 64 * 1024
LANED = {"CTXSTORE_LARGE_BODY_LANE": str(LANE), "CTXSTORE_MAX_BODY_BYTES": str(1024 * 1024)}


def big_node(size: int = 2 * LANE, role: str = "user") -> dict[str, Any]:
    return {"role": role, "output": "lane " * (size // 5)}


def test_the_threshold_is_on_for_postgresql_with_partitions_only() -> None:
    pg, lite = "postgresql://u@h/db", "sqlite:///x.db"
    assert lane_threshold({}, pg, partitions=8) == DEFAULT_THRESHOLD
    assert lane_threshold({}, pg, partitions=1) == 0  # see its docstring
    assert lane_threshold({"CTXSTORE_LARGE_BODY_LANE": "1000"}, pg, partitions=1) == 1000
    assert lane_threshold({}, lite, partitions=8) == 0
    assert lane_threshold({"CTXSTORE_LARGE_BODY_LANE": "0"}, pg) == 0
    assert lane_threshold({"CTXSTORE_LARGE_BODY_LANE": "1000"}, pg) == 1000
    assert lane_threshold({"CTXSTORE_LANE_HELPER": "123"}, pg) == 0  # no helper of a helper
    with pytest.raises(ValueError, match="PostgreSQL"):
        lane_threshold({"CTXSTORE_LARGE_BODY_LANE": "1000"}, lite)
    with pytest.raises(ValueError, match="byte count"):
        lane_threshold({"CTXSTORE_LARGE_BODY_LANE": "1MB"}, pg)


# ------------------------------------------------------------ a real server


@pytest.fixture
def laned(store_url: str) -> Iterator[str]:
    if not store_url.startswith("postgresql"):
        pytest.skip("the large-body lane runs on PostgreSQL only")
    with serving(store_url, **LANED) as base:
        wait_for_helper(base)
        yield base


def wait_for_helper(base: str) -> None:
    deadline = time.monotonic() + 60
    while httpx.get(f"{base}/health").json().get("large_body_lane") != "ready":
        assert time.monotonic() < deadline, "the helper did not come up"
        time.sleep(0.2)


def helper_pid(base: str) -> int:
    """The helper's pid: the process on a lane socket whose parent serves ``base``'s port."""
    port = base.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            parent_argv = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if b"--uds" in argv and port.encode() in parent_argv:
            return int(entry.name)
    raise AssertionError("no helper process found")


def test_a_large_body_is_served_by_the_helper_and_read_back_at_once(laned: str) -> None:
    with httpx.Client(base_url=laned, timeout=60) as http:
        sid = http.post("/sessions", json={"title": "lane"}).json()["session_id"]
        big = http.post(f"/sessions/{sid}/nodes", json=big_node())
        assert big.status_code == 201, big.text
        assert big.headers["ctxstore-lane"] == "helper"
        small = http.post(f"/sessions/{sid}/nodes", json={"role": "assistant", "output": "ok"})
        assert small.status_code == 201 and "ctxstore-lane" not in small.headers
        assert small.json()["version"] == big.json()["version"] + 1
        nodes = http.get(f"/sessions/{sid}/dag").json()["nodes"]
        assert [n["node_id"] for n in nodes][-2:] == [big.json()["node_id"],
                                                     small.json()["node_id"]]  # fmt: skip
        rendered = http.get(f"/sessions/{sid}/render").text
        assert "lane lane lane" in rendered
        # A chunked body (no Content-Length) of the same size takes the same lane.
        raw = json.dumps(big_node()).encode()
        chunked = http.post(f"/sessions/{sid}/nodes", headers=JSON,
                            content=iter([raw[:1000], raw[1000:]]))  # fmt: skip
        assert chunked.status_code == 201 and chunked.headers["ctxstore-lane"] == "helper"


def test_a_retry_by_key_through_the_helper_stores_once(laned: str) -> None:
    with httpx.Client(base_url=laned, timeout=60) as http:
        sid = http.post("/sessions", json={"title": "lane"}).json()["session_id"]
        key = {"Idempotency-Key": "lane-retry-1"}
        first = http.post(f"/sessions/{sid}/nodes", json=big_node(), headers=key)
        again = http.post(f"/sessions/{sid}/nodes", json=big_node(), headers=key)
        assert first.status_code == again.status_code == 201
        assert again.json() == first.json()
        assert len(http.get(f"/sessions/{sid}/dag").json()["nodes"]) == 1


def test_the_limits_are_still_the_api_process_own(laned: str) -> None:
    with httpx.Client(base_url=laned, timeout=60) as http:
        sid = http.post("/sessions", json={"title": "lane"}).json()["session_id"]
        over = json.dumps(big_node(1100 * 1024)).encode()
        chunks = [over[i : i + 65536] for i in range(0, len(over), 65536)]
        refused = http.post(f"/sessions/{sid}/nodes", headers=JSON, content=iter(chunks))
        assert refused.status_code == 413
        assert refused.json()["error"]["code"] == "body_too_large"
        assert "ctxstore-lane" not in refused.headers
        text = http.post(f"/sessions/{sid}/nodes", content=json.dumps(big_node()),
                         headers={"content-type": "text/plain"})  # fmt: skip
        assert text.status_code == 415
        assert http.get(f"/sessions/{sid}/dag").json()["nodes"] == []


def test_the_key_is_checked_here_and_a_claimed_principal_is_ignored(
    laned: str, store_url: str
) -> None:
    engine = create_engine(sqlalchemy_url(store_url))
    try:
        keys = KeyStore(engine)
        acme = {"Authorization": f"Bearer {keys.create('acme', 'write')[1]}"}
        other = {"Authorization": f"Bearer {keys.create('other', 'write')[1]}"}
        reader = {"Authorization": f"Bearer {keys.create('acme', 'read')[1]}"}
    finally:
        engine.dispose()
    claim = json.dumps(["acme", None, "admin"])
    with httpx.Client(base_url=laned, timeout=60) as http:
        sid = http.post("/sessions", json={}, headers=acme).json()["session_id"]
        path = f"/sessions/{sid}/nodes"
        assert http.post(path, json=big_node()).status_code == 401
        spoofed = http.post(path, json=big_node(), headers={"ctxstore-principal": claim})
        assert spoofed.status_code == 401
        assert http.post(path, json=big_node(), headers=reader).status_code == 403
        stranger = http.post(path, json=big_node(), headers={**other, "ctxstore-principal": claim})
        assert stranger.status_code == 404 and stranger.headers["ctxstore-lane"] == "helper"
        mine = http.post(path, json=big_node(), headers=acme)
        assert mine.status_code == 201 and mine.headers["ctxstore-lane"] == "helper"
        assert len(http.get(f"/sessions/{sid}/dag", headers=acme).json()["nodes"]) == 1


def test_an_early_answer_from_the_helper_is_the_answer(laned: str) -> None:
    """The helper refuses a bad key before it reads the body, and hangs up: its answer
    reaches the client (a large body fills the socket, so the send fails first)."""
    with httpx.Client(base_url=laned, timeout=60) as http:
        sid = http.post("/sessions", json={"title": "lane"}).json()["session_id"]
        bad = http.post(f"/sessions/{sid}/nodes", json=big_node(900 * 1024),
                        headers={"Idempotency-Key": "k" * 500})  # fmt: skip
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"]["code"] == "invalid_idempotency_key"
        assert bad.headers["ctxstore-lane"] == "helper"
        # A path no route takes is this process's 404, its body never passed on.
        nowhere = http.post("/nowhere", json=big_node(900 * 1024))
        assert nowhere.status_code == 404 and "ctxstore-lane" not in nowhere.headers
        assert http.get(f"/sessions/{sid}/dag").json()["nodes"] == []


def test_a_length_beside_chunked_framing_is_not_passed_on(laned: str) -> None:
    """A body sent chunked that also claims a Content-Length (the chunks win, as uvicorn
    reads them) reaches the helper chunked, whole."""
    with httpx.Client(base_url=laned, timeout=60) as http:
        sid = http.post("/sessions", json={"title": "lane"}).json()["session_id"]
    raw = json.dumps(big_node()).encode()
    host, port = laned.removeprefix("http://").split(":")
    head = (f"POST /sessions/{sid}/nodes HTTP/1.1\r\nHost: {host}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()  # fmt: skip
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(head + b"%x\r\n%b\r\n0\r\n\r\n" % (len(raw), raw))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201"), answer[:300]
    assert b"ctxstore-lane: helper" in answer


def test_the_helper_stops_when_its_api_process_is_killed(laned: str) -> None:
    helper = helper_pid(laned)
    server = int(Path(f"/proc/{helper}/stat").read_text().rsplit(")", 1)[1].split()[1])
    folder = next(arg for arg in Path(f"/proc/{helper}/cmdline").read_bytes().split(b"\0")
                  if arg.endswith(b"helper.sock")).decode().rsplit("/", 1)[0]  # fmt: skip
    os.kill(server, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{helper}").exists() and b"Z" not in _state(helper):
        assert time.monotonic() < deadline, "the helper outlived its API process"
        time.sleep(0.2)
    assert not os.path.exists(folder)


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return b"Z"


def test_a_dead_helper_is_replaced_and_meanwhile_bodies_are_served_here(laned: str) -> None:
    with httpx.Client(base_url=laned, timeout=60) as http:
        sid = http.post("/sessions", json={"title": "lane"}).json()["session_id"]
        path = f"/sessions/{sid}/nodes"
        assert http.post(path, json=big_node()).headers["ctxstore-lane"] == "helper"
        first = helper_pid(laned)
        os.kill(first, signal.SIGKILL)
        time.sleep(0.2)
        served_here = http.post(path, json=big_node())
        assert served_here.status_code == 201 and "ctxstore-lane" not in served_here.headers
        wait_for_helper(laned)  # the body above found it dead and started another
        again = http.post(path, json=big_node())
        assert again.status_code == 201 and again.headers["ctxstore-lane"] == "helper"
        assert helper_pid(laned) != first
        assert len(http.get(f"/sessions/{sid}/dag").json()["nodes"]) == 3


def test_a_stuck_helper_is_killed_and_replaced(store_url: str) -> None:
    """A helper that stops reading (stopped here with SIGSTOP) fails its request within
    the body timeout, and is killed: the next large bodies do not wait on it."""
    if not store_url.startswith("postgresql"):
        pytest.skip("the large-body lane runs on PostgreSQL only")
    with serving(store_url, **LANED, CTXSTORE_BODY_TIMEOUT="2") as base:
        wait_for_helper(base)
        stuck = helper_pid(base)
        os.kill(stuck, signal.SIGSTOP)
        try:
            with httpx.Client(base_url=base, timeout=60) as http:
                sid = http.post("/sessions", json={"title": "lane"}).json()["session_id"]
                path = f"/sessions/{sid}/nodes"
                failed = http.post(path, json=big_node(900 * 1024))
                assert failed.status_code == 503, failed.text
                assert failed.json()["error"]["code"] == "helper_failed"
                deadline = time.monotonic() + 30
                while _state(stuck) != b"Z":
                    assert time.monotonic() < deadline, "the stuck helper was not killed"
                    time.sleep(0.1)
                assert http.post(path, json=big_node()).status_code == 201
                wait_for_helper(base)
                assert helper_pid(base) != stuck
                again = http.post(path, json=big_node())
                assert again.status_code == 201 and again.headers["ctxstore-lane"] == "helper"
                assert len(http.get(f"{path.rsplit('/', 1)[0]}/dag").json()["nodes"]) == 2
        finally:
            try:
                os.kill(stuck, signal.SIGCONT)
            except ProcessLookupError:
                pass


# ------------------------------------------------------------ in process


class FakeHelper:
    """A helper socket under the test's control: absent, or one that hangs up."""

    def __init__(self, folder: str) -> None:
        self.socket = os.path.join(folder, "helper.sock")
        self.secret = "not-checked-here"
        self.starts = 0
        self.failures: list[bool] = []  # each failed request: whether the helper was stuck

    def ensure(self) -> int:
        self.starts += 1
        return self.starts

    def running(self, helper: int | None = None) -> bool:
        return False

    def failed(self, stuck: bool, helper: int | None = None) -> None:
        self.failures.append(stuck)

    def stop(self) -> None:
        pass


@pytest.fixture
def lane_client(runtime: Any) -> Iterator[tuple[TestClient, FakeHelper]]:
    with tempfile.TemporaryDirectory() as folder:
        helper = FakeHelper(folder)
        app = create_app(runtime, lane=Lane(helper, LANE))  # type: ignore[arg-type]
        with TestClient(app, base_url=LOCAL) as client:
            yield client, helper


def test_without_a_helper_a_large_body_is_served_here(
    lane_client: tuple[TestClient, FakeHelper],
) -> None:
    client, helper = lane_client
    sid = client.post("/sessions", json={}).json()["session_id"]
    answer = client.post(f"/sessions/{sid}/nodes", json=big_node())
    assert answer.status_code == 201 and "ctxstore-lane" not in answer.headers
    assert helper.starts == 2  # with the app, and again when the large body came
    assert len(client.get(f"/sessions/{sid}/dag").json()["nodes"]) == 1


def test_health_says_the_lane_is_starting_until_the_helper_answers(
    lane_client: tuple[TestClient, FakeHelper],
) -> None:
    client, _ = lane_client
    assert client.get("/health").json()["large_body_lane"] == "starting"


def test_a_claimed_principal_needs_the_helper_secret_and_a_unix_socket_peer(
    runtime: Any, store_url: str
) -> None:
    engine = create_engine(sqlalchemy_url(store_url))
    try:
        KeyStore(engine).create("acme", "write")  # keys exist: no zero set-up
    finally:
        engine.dispose()
    app = create_app(runtime, lane_secret="right")

    def claiming(proof: Any, tenant: Any = "acme") -> dict[str, str]:
        return {"ctxstore-principal": json.dumps([proof, tenant, None, "write"]), **JSON}

    async def post(peer: Any, proof: Any, tenant: Any = "acme") -> int:
        transport = httpx.ASGITransport(app=app, client=peer)
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as http:
            answer = await http.post("/sessions", content=b"{}",
                                     headers=claiming(proof, tenant))  # fmt: skip
            return answer.status_code

    assert asyncio.run(post(None, "wrong")) == 401
    assert asyncio.run(post(("127.0.0.1", 5000), "right")) == 401  # a TCP peer
    # Malformed claims are no claim (the key is then required), never a 500.
    assert asyncio.run(post(None, "r\u00efght")) == 401
    assert asyncio.run(post(None, ["right"])) == 401
    assert asyncio.run(post(None, "right", tenant={"not": "text"})) == 401
    assert asyncio.run(post(None, "right", tenant=[[[[[[]]]]]] * 2)) == 401
    assert asyncio.run(post(None, "right")) == 201
    deep = {"headers": [(auth.FORWARDED_PRINCIPAL, b"[" * 50_000 + b"]" * 50_000)]}
    assert auth._forwarded(deep, "right") is None  # a RecursionError in json is no claim
    lone = {"headers": [(auth.FORWARDED_PRINCIPAL, b'["\\ud800", "acme", null, "write"]')]}
    assert auth._forwarded(lone, "right") is None  # a lone surrogate is no claim either


def hanging_up(path: str) -> threading.Event:
    """A Unix socket server that reads part of a request and closes the connection."""
    ready, loop = threading.Event(), asyncio.new_event_loop()

    async def serve() -> None:
        async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(4096)
            writer.close()

        await asyncio.start_unix_server(cut, path)
        ready.set()
        await asyncio.sleep(30)

    threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True).start()
    ready.wait(10)
    return ready


def test_a_helper_that_fails_mid_request_is_a_503_to_retry(
    lane_client: tuple[TestClient, FakeHelper],
) -> None:
    client, helper = lane_client
    sid = client.post("/sessions", json={}).json()["session_id"]
    hanging_up(helper.socket)
    answer = client.post(f"/sessions/{sid}/nodes", json=big_node())
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "helper_failed"
    assert "Idempotency-Key" in answer.json()["error"]["message"]
    assert answer.headers["retry-after"] == "1"
