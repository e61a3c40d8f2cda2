"""The lane's middleware against helpers that misbehave (``api.large_body_lane``).

The middleware is driven directly, with a client whose body arrives in spaced
chunks and a stand-in helper on a Unix socket: one that answers early and
hangs up, one that never reads or answers, one that stops reading.  What is
checked is the answer the client gets and what the helper's keeper is told.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from api import auth, large_body_lane
from api.large_body_lane import Lane, LargeBodyLane
from api.limits import RequestRefused, body_too_large

THRESHOLD = 64 * 1024
EARLY = b'{"error":{"code":"invalid_idempotency_key"}}'


class StandIn:
    """A helper's keeper (``HelperServer``'s part the lane uses), with a socket served by
    ``behaviour`` in a thread, one connection at a time."""

    def __init__(self, folder: str, behaviour: Callable[[socket.socket], None]) -> None:
        self.socket = os.path.join(folder, "helper.sock")
        self.secret = "stand-in"
        self.failures: list[bool] = []  # each failed request: whether it counted as stuck
        self.served = 0
        self.start_error: OSError | None = None
        self.held: list[socket.socket] = []
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.socket)
        listener.listen()
        self.listener = listener

        def serve() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                self.held.append(conn)
                behaviour(conn)

        threading.Thread(target=serve, daemon=True).start()

    def ensure(self) -> int:
        if self.start_error is not None:
            raise self.start_error
        return 1

    def running(self, helper: int | None = None) -> bool:
        self.served += 1
        return True

    def failed(self, stuck: bool, helper: int | None = None) -> None:
        self.failures.append(stuck)

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


def read_head(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(4096)


def answers_early_and_hangs_up(conn: socket.socket) -> None:
    """As uvicorn does with a bad Idempotency-Key: answer from the head, then close."""
    read_head(conn)
    head = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
    conn.sendall(head + b"content-length: %d\r\n\r\n%b" % (len(EARLY), EARLY))
    conn.close()


def stops_reading_then_answers(conn: socket.socket) -> None:
    """Hangs up on the body at once, and answers only after the lane's send has failed
    (a helper refusing in the middle of its own work)."""
    read_head(conn)
    conn.shutdown(socket.SHUT_RD)  # the lane's next send fails (EPIPE)
    time.sleep(0.2)
    head = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
    conn.sendall(head + b"content-length: %d\r\n\r\n%b" % (len(EARLY), EARLY))
    conn.close()


def slow_but_healthy(conn: socket.socket) -> None:
    """Answers /health at once, and a command never (one waiting on a slow summarizer)."""
    data = b""
    while b"\r\n" not in data:
        data += conn.recv(4096)
    if data.startswith(b"GET /health"):
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        conn.close()


def never_reads(conn: socket.socket) -> None:
    pass  # held open, never read, never answered


def stops_reading(conn: socket.socket) -> None:
    read_head(conn)
    conn.shutdown(socket.SHUT_RD)  # the lane's sends now fail; no answer comes


@pytest.fixture
def folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as path:
        yield path


@pytest.fixture
def stand_in(folder: str) -> Iterator[Callable[..., StandIn]]:
    made: list[StandIn] = []

    def make(behaviour: Callable[[socket.socket], None]) -> StandIn:
        made.append(StandIn(folder, behaviour))
        return made[-1]

    yield make
    for helper in made:
        helper.close()


class Client:
    """One request through the middleware: its body in spaced chunks, then (optionally)
    a hang-up; what the middleware sends back is kept."""

    def __init__(self, size: int, chunk: int = 16 * 1024, spacing: float = 0.005,
                 then: Message | Exception | None = None) -> None:  # fmt: skip
        body = b"x" * size
        self.chunks = [body[i : i + chunk] for i in range(0, size, chunk)]
        self.size, self.spacing, self.then = size, spacing, then
        self.sent: list[Message] = []
        self.served_here = b""

    async def receive(self) -> Message:
        if self.chunks:
            await asyncio.sleep(self.spacing)
            chunk = self.chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(self.chunks)}
        if isinstance(self.then, Exception):
            raise self.then
        if self.then is not None:
            return self.then
        await asyncio.Event().wait()  # the client waits for its answer
        raise AssertionError("unreachable")

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int | None:
        return self.sent[0]["status"] if self.sent else None

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"]) if self.sent else {}


async def inner(scope: Scope, receive: Receive, send: Send) -> None:
    """The app behind the lane: what serves a body "here"."""
    body, more = b"", True
    while more:
        message = await receive()
        body, more = body + message.get("body", b""), message.get("more_body", False)
    await Response(b"here %d" % len(body), 201)(scope, receive, send)


def run(helper: StandIn, client: Client, body_timeout: float = 30.0) -> None:
    routes = [Route("/x", lambda request: Response(), methods=["POST"])]
    lane = LargeBodyLane(inner, Lane(helper, THRESHOLD), routes,  # type: ignore[arg-type]
                         body_timeout=body_timeout)  # fmt: skip
    scope: dict[str, Any] = {
        "type": "http", "method": "POST", "path": "/x", "raw_path": b"/x",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 5000),
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(client.size).encode())],
        auth.TENANT: "acme", auth.KEY_ID: None, auth.SCOPE: "write",
    }  # fmt: skip
    asyncio.run(asyncio.wait_for(lane(scope, client.receive, client.send), 30))


def test_an_early_answer_survives_the_send_that_then_fails(stand_in: Any) -> None:
    """Just over the threshold, each chunk is sent straight to the socket: once the
    helper has answered and hung up, the next send fails (EPIPE), and the answer
    already on the socket is still the client's."""
    helper = stand_in(answers_early_and_hangs_up)
    for _ in range(5):
        client = Client(size=300 * 1024)
        run(helper, client)
        assert client.status == 400, client.sent
        assert client.sent[1]["body"] == EARLY
        assert client.headers[b"ctxstore-lane"] == b"helper"
    assert helper.failures == []


def test_an_answer_that_comes_after_the_failed_send_is_still_the_clients(
    stand_in: Any,
) -> None:
    """The send fails first and the answer comes 0.2 s later, in another turn of the
    loop: the lane waits for it rather than count the helper failed."""
    helper = stand_in(stops_reading_then_answers)
    client = Client(size=THRESHOLD * 4)  # more than the socket's buffer: a send fails
    run(helper, client)
    assert client.status == 400, client.sent
    assert client.sent[1]["body"] == EARLY
    assert helper.failures == []


def test_a_helper_that_does_not_answer_is_a_503_and_counted_stuck(
    stand_in: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(large_body_lane, "ANSWER_TIMEOUT", 0.3)
    helper = stand_in(never_reads)
    client = Client(size=THRESHOLD + 1024)  # fits in the socket's buffer: sent whole
    run(helper, client)
    assert client.status == 503 and b"helper_failed" in client.sent[1]["body"]
    assert helper.failures == [True]


def test_a_helper_that_times_out_but_answers_health_is_not_killed(
    stand_in: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killing it would end its other requests in flight too: one slow command is a
    failure, not a wedged helper."""
    monkeypatch.setattr(large_body_lane, "ANSWER_TIMEOUT", 0.3)
    helper = stand_in(slow_but_healthy)
    client = Client(size=THRESHOLD + 1024)
    run(helper, client)
    assert client.status == 503 and b"helper_failed" in client.sent[1]["body"]
    assert helper.failures == [False]


def test_a_helper_that_does_not_read_is_a_503_and_counted_stuck(stand_in: Any) -> None:
    helper = stand_in(never_reads)
    client = Client(size=4 * 1024 * 1024, chunk=256 * 1024, spacing=0)
    run(helper, client, body_timeout=0.3)
    assert client.status == 503 and b"helper_failed" in client.sent[1]["body"]
    assert helper.failures == [True]


def test_a_helper_that_hangs_up_without_an_answer_is_a_503_not_stuck(stand_in: Any) -> None:
    helper = stand_in(lambda conn: (read_head(conn), conn.close()))
    client = Client(size=300 * 1024)
    run(helper, client)
    assert client.status == 503
    assert helper.failures == [False]


def test_a_limit_broken_after_the_helper_stopped_reading_is_this_process_answer(
    stand_in: Any,
) -> None:
    """The helper stopped reading (its answer not in yet) and the rest of the body breaks
    a limit here: the refusal (BodyLimits answers it) wins, and the helper is not blamed."""
    helper = stand_in(stops_reading)
    client = Client(size=300 * 1024, then=body_too_large(200 * 1024))
    with pytest.raises(RequestRefused):
        run(helper, client)
    assert client.sent == [] and helper.failures == []


def test_a_client_that_leaves_awaiting_the_answer_gets_none(stand_in: Any) -> None:
    helper = stand_in(never_reads)
    client = Client(size=THRESHOLD + 1024, then={"type": "http.disconnect"})
    run(helper, client)
    assert client.sent == [] and helper.failures == []


def test_a_helper_that_cannot_be_started_leaves_the_body_served_here(stand_in: Any) -> None:
    helper = stand_in(never_reads)
    helper.start_error = OSError(24, "Too many open files")
    client = Client(size=300 * 1024)
    run(helper, client)
    assert client.status == 201 and client.sent[1]["body"] == b"here %d" % (300 * 1024)
    assert b"ctxstore-lane" not in client.headers


def test_a_helper_whose_backlog_is_full_is_not_connected(folder: str) -> None:
    """A Unix socket with a full backlog refuses with EAGAIN, which asyncio's connect
    takes for success: the lane must see it as not up (the body is served here)."""
    path = os.path.join(folder, "full.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)  # never accepts: one connection fills it
    held: list[socket.socket] = []

    async def connects() -> list[bool]:
        results = []
        for _ in range(3):
            try:
                held.append(await large_body_lane._connect(path))
                results.append(True)
            except OSError:
                results.append(False)
        return results

    try:
        assert asyncio.run(connects()) == [True, False, False]
    finally:
        for sock in held:
            sock.close()
        listener.close()
