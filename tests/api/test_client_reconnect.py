"""The Python client sends a read, or a keyed command, again when the server closed the
connection under it (uvicorn closes an idle keep-alive after 5 s).

A small proxy in front of a real server drops its first connection: as an
idle keep-alive the server closed looks (the request read, no answer), or
after the command reached the server and was stored (the answer lost).  A
read and a command with an ``Idempotency-Key`` succeed, the command stored
once; a command without a key is not sent twice.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit

import httpx
import pytest

from api.client import AsyncClient, Client


def _request(conn: socket.socket) -> bytes:
    """One whole HTTP/1.1 request off ``conn`` (headers, then a Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    with suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class DroppingProxy:
    """Forwards to ``upstream``; the first connection is closed with no answer, its
    request passed on first when ``deliver``."""

    def __init__(self, upstream: str, deliver: bool) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.deliver = deliver
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with suppress(OSError):
            while True:
                conn, _ = self.listener.accept()
                self.connections += 1
                target = self._drop if self.connections == 1 else self._forward
                threading.Thread(target=target, args=(conn,), daemon=True).start()

    def _drop(self, conn: socket.socket) -> None:
        with conn:
            request = _request(conn)
            if self.deliver:  # the server stores it and answers; the answer is lost
                with socket.create_connection(self.upstream) as up:
                    up.sendall(request)
                    answer = b""
                    while b"\r\n\r\n" not in answer:
                        answer += up.recv(65536)

    def _forward(self, conn: socket.socket) -> None:
        up = socket.create_connection(self.upstream)
        back = threading.Thread(target=_pipe, args=(up, conn), daemon=True)
        back.start()
        _pipe(conn, up)
        back.join()
        conn.close()
        up.close()

    def close(self) -> None:
        self.listener.close()


@contextmanager
def proxy(upstream: str, deliver: bool = False) -> Iterator[DroppingProxy]:
    found = DroppingProxy(upstream, deliver)
    try:
        yield found
    finally:
        found.close()


def test_a_read_meeting_a_closed_connection_is_sent_again(live_server: str) -> None:
    with Client(live_server) as direct:
        sid = direct.start_session("t").session_id
    with proxy(live_server) as p, Client(p.url) as ctx:
        assert ctx.get_session(sid).session_id == sid
        assert p.connections == 2


def test_a_keyed_command_whose_answer_was_lost_is_sent_again_and_stored_once(
    live_server: str,
) -> None:
    with proxy(live_server, deliver=True) as p, Client(p.url) as ctx:
        started = ctx.start_session("once", idempotency_key="start-once")
        assert p.connections == 2
        titles = [s.title for s in ctx.iter_sessions()]
    assert titles == ["once"]
    with Client(live_server) as direct:
        assert direct.get_session(started.session_id).title == "once"


def test_a_command_without_a_key_is_not_sent_twice(live_server: str) -> None:
    with proxy(live_server, deliver=True) as p, Client(p.url) as ctx:
        with pytest.raises(httpx.RemoteProtocolError):
            ctx.start_session("maybe")
        assert p.connections == 1
    with Client(live_server) as direct:  # it was stored once, and only once
        assert [s.title for s in direct.iter_sessions()] == ["maybe"]


def test_the_async_client_sends_again_too(live_server: str) -> None:
    async def main() -> list[str]:
        with proxy(live_server, deliver=True) as p:
            async with AsyncClient(p.url) as ctx:
                await ctx.start_session("async", idempotency_key="start-async")
                assert p.connections == 2
                listed = await ctx.list_sessions()
        return [s.title for s in listed.sessions]

    assert asyncio.run(main()) == ["async"]
