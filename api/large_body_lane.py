"""Large request bodies are handled by the helper server, not by this process.

An ASGI middleware, innermost: the body has passed the host, CORS and JSON
checks, the API key (``api.auth``), the client's request cap and the body's
size and time limits (``api.limits.BodyLimits``, which still bounds what is
passed on).  A request a command route takes, whose body is at least the
threshold, is streamed as it arrives to the helper (``api.helper_server``)
over its Unix socket, with the caller's tenant, key and scope in one header
the helper trusts with the secret the two share, from its socket only.  The
helper's answer is read while the body is sent (it may answer early) and
given to the client whole.  Why: ``api.helper_server``.

- Until the helper takes connections (starting, or restarting after it
  died) the body is served here, as without a lane: nothing was sent, so
  nothing can be stored twice.
- If the helper fails once it has the request (it hangs up, stops reading,
  or does not answer in ``ANSWER_TIMEOUT``), whether it stored the command is
  unknown: ``503 helper_failed``, and a retry with the same
  ``Idempotency-Key`` returns the first answer or stores it once.  The
  helper is told (``HelperServer.failed``): one that is stuck is killed, and
  the next large body starts another.
- Every answer from the helper carries ``ctxstore-lane: helper``.

The bytes are passed on over a plain non-blocking socket, one connection per
request: this process's share of a large body is then what uvicorn costs to
receive it and one ``send`` per chunk.  An HTTP client library cost several
times that per chunk, and a flood of 8 MB bodies kept this process's event
loop half busy (``scripts/bench_limits.py``).  Not asyncio's streams either:
when a write fails there (the helper answered early and hung up), the
transport is torn down and the answer already on the socket is lost.  On a
socket, a failed ``send`` leaves the answer to ``recv``.  h11 (uvicorn's
parser) reads it.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Sequence
from typing import Any

import h11
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import auth
from api.errors import error_response
from api.helper_server import HelperServer
from api.limits import content_length

PRINCIPAL = auth.FORWARDED_PRINCIPAL  # tenant, key id and scope, as resolved here
SERVED_BY = (b"ctxstore-lane", b"helper")
METHODS = ("POST", "PUT", "PATCH")
# Not passed on: hop-by-hop framing (each hop has its own), and what this
# process's own middleware sets on the way out (CORS).
HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade",
              b"proxy-connection", b"trailer"}  # fmt: skip
OUR_OWN = (b"access-control-", b"vary", b"date", b"server")
ANSWER_TIMEOUT = 600.0  # seconds: a command may wait on a summarizer; a dead helper ends it
CONNECT_TIMEOUT = 2.0
READ_SIZE = 64 * 1024
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]  # the helper's status, headers, body


class HelperFailed(Exception):
    """The helper went away, or answered nonsense, once it had the request."""


class Lane:
    """The helper and the threshold; stopped with the app."""

    def __init__(self, helper: HelperServer, threshold: int) -> None:
        self.helper, self.threshold = helper, threshold

    def start(self) -> None:
        try:
            self.helper.ensure()
        except OSError:
            pass  # logged; large bodies are served in the process until it starts

    async def ready(self) -> bool:
        """Whether the helper answers an HTTP request now (``/health`` shows it)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.helper.socket), CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError):
            return False
        try:
            writer.write(b"GET /health HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            line = await asyncio.wait_for(reader.readline(), CONNECT_TIMEOUT)
            return line.startswith(b"HTTP/1.1 ")  # any answer: it is up
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()

    async def close(self) -> None:
        await asyncio.to_thread(self.helper.stop)  # it may wait for the helper to exit


class LargeBodyLane:
    def __init__(self, app: ASGIApp, lane: Lane, routes: Sequence[BaseRoute],
                 body_timeout: float = 30.0) -> None:  # fmt: skip
        """``routes``: only a request one of them takes is passed on (any other is
        this process's 404 or 405, with its body unread); ``body_timeout``: how long
        the helper may take to read what is passed on before it counts as failed."""
        self.app, self.lane, self.routes = app, lane, routes
        self.body_timeout = body_timeout

    def _passes(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] not in METHODS:
            return False
        if scope.get(auth.TENANT) is None:  # refused before (the app answers), or no auth
            return False
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:  # its route and endpoint, as the router would say
                scope.update(child, route=route)  # (api.observe labels the request by them)
                return True
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._passes(scope):
            await self.app(scope, receive, send)
            return
        threshold = self.lane.threshold
        length = content_length(scope)
        if length is not None and length < threshold and not _chunked(scope):
            await self.app(scope, receive, send)
            return
        head, more, size = [], True, 0  # what came in before the body's size is known
        while more and size < threshold:
            message = await receive()
            if message["type"] != "http.request":
                break
            head.append(message.get("body", b""))
            size += len(head[-1])
            more = message.get("more_body", False)
        if size < threshold:
            await self.app(scope, _replaying(head, more, receive), send)
            return
        helper = self.lane.helper
        try:
            number = helper.ensure()  # which helper the body goes to
            sock = await _connect(helper.socket)
        except (OSError, TimeoutError):  # not up (yet): served here, with what was read so far
            await self.app(scope, _replaying(head, more, receive), send)
            return
        try:
            answer = await self._exchange(scope, head, more, receive, sock)
        except ConnectionAbortedError:
            return  # the client went away: nothing to answer
        except (OSError, HelperFailed, TimeoutError) as failure:
            # A helper that timed out is killed, with what else it has in flight, only
            # if it does not answer /health either: one slow command is not a wedge.
            stuck = isinstance(failure, TimeoutError) and not await self.lane.ready()
            helper.failed(stuck=stuck, helper=number)
            await _helper_failed(scope, receive, send)
            return
        finally:
            sock.close()  # at once: what was not sent is dropped, never delivered later
        helper.running(number)
        status, headers, body = answer
        await send({"type": "http.response.start", "status": status,
                    "headers": [*headers, SERVED_BY]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    async def _exchange(self, scope: Scope, head: list[bytes], more: bool, receive: Receive,
                        sock: socket.socket) -> Answer:  # fmt: skip
        """Send the request while reading the answer: the helper may answer before the
        body is in (a bad key, say) and close, and its answer is the one to give."""
        secret = self.lane.helper.secret
        upload = asyncio.create_task(
            _pass_on(scope, head, more, receive, sock, secret, self.body_timeout)
        )
        answer = asyncio.create_task(_answer(sock, scope))
        tasks = [upload, answer]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if upload.done() and not answer.done():
                failed = upload.exception()
                if failed is not None and not isinstance(
                    failed, BrokenPipeError | ConnectionResetError
                ):
                    raise failed  # BodyLimits' refusal, the client gone, a wedged helper
                # The whole body is in (or the helper hung up on it): its answer, unless
                # the client goes first, or the rest of its body breaks a limit here.
                gone = asyncio.create_task(_disconnect(receive))
                tasks.append(gone)
                done, _ = await asyncio.wait({answer, gone}, timeout=ANSWER_TIMEOUT,
                                             return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
                if gone in done and answer not in done:
                    gone.result()  # a RequestRefused (408, 413) is this process's answer
                    raise ConnectionAbortedError("the client went away awaiting the answer")
                if not done:
                    raise TimeoutError(f"the helper did not answer in {ANSWER_TIMEOUT:g} s")
            return answer.result()
        finally:
            for task in tasks:
                task.cancel()
            # Each one's end is seen (asyncio would log it as never retrieved), and none
            # still waits on the socket when it is closed.
            await asyncio.gather(*tasks, return_exceptions=True)


async def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await asyncio.get_running_loop().sock_connect(sock, path)
        # A Unix socket whose backlog is full refuses with EAGAIN, which asyncio takes
        # for "in progress" and then for done: not connected, the body is served here.
        sock.getpeername()
    except BaseException:
        sock.close()
        raise
    return sock


async def _pass_on(scope: Scope, head: list[bytes], more: bool, receive: Receive,
                   sock: socket.socket, secret: str, timeout: float) -> None:  # fmt: skip
    """The request, its body as it arrives (chunked if the client's was); each piece
    must be taken by the helper within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    chunked = _chunked(scope)
    target = scope.get("raw_path") or scope["path"].encode()
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    lines = [scope["method"].encode() + b" " + target + b" HTTP/1.1"]
    lines += [k + b": " + v for k, v in _request_headers(scope, secret)
              if not (chunked and k == b"content-length")]  # fmt: skip
    lines += [b"transfer-encoding: chunked"] if chunked else []

    def framed(chunk: bytes) -> bytes:
        if not chunked or not chunk:
            return chunk
        return b"%x\r\n%b\r\n" % (len(chunk), chunk)

    async def put(data: bytes) -> None:
        if data:
            async with asyncio.timeout(timeout):
                await loop.sock_sendall(sock, data)

    await put(b"\r\n".join([*lines, b"connection: close", b"", b""]) + framed(b"".join(head)))
    while more:
        message = await receive()  # BodyLimits' bounds: a refusal ends the forward
        if message["type"] != "http.request":
            raise ConnectionAbortedError("the client went away mid-body")
        await put(framed(message.get("body", b"")))
        more = message.get("more_body", False)
    if chunked:
        await put(b"0\r\n\r\n")


async def _disconnect(receive: Receive) -> None:
    """Returns when the client has gone; the rest of a body the helper hung up on is
    read meanwhile (and bounded: ``RequestRefused``)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _chunked(scope: Scope) -> bool:
    """Whether the body comes chunked: a ``Transfer-Encoding`` wins over a length (as
    uvicorn's parser reads it), and the length the client claimed is not passed on."""
    headers = scope["headers"]
    return content_length(scope) is None or any(k == b"transfer-encoding" for k, _ in headers)


async def _answer(sock: socket.socket, scope: Scope) -> Answer:
    """The helper's status, headers (those passed back) and body."""
    parser = h11.Connection(h11.CLIENT)
    parser.send(h11.Request(method=scope["method"], target="/",
                            headers=[("host", "helper"), ("content-length", "0")]))  # fmt: skip
    parser.send(h11.EndOfMessage())  # the request's bytes go out in _pass_on, not through h11
    loop = asyncio.get_running_loop()
    status, headers, body = 0, [], bytearray()
    while True:
        try:
            event: Any = parser.next_event()
        except h11.RemoteProtocolError as exc:
            raise HelperFailed(str(exc)) from None
        if event is h11.NEED_DATA:
            parser.receive_data(await loop.sock_recv(sock, READ_SIZE))
        elif isinstance(event, h11.Response):
            status = event.status_code
            headers = [(k, v) for k, v in event.headers if _passed_back(k)]
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return status, headers, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            raise HelperFailed("the helper closed the connection before it answered")


def _passed_back(name: bytes) -> bool:
    return name not in HOP_BY_HOP and not name.startswith(OUR_OWN)


def _request_headers(scope: Scope, secret: str) -> list[tuple[bytes, bytes]]:
    """The caller's headers, minus framing and any principal it claimed, plus ours."""
    headers = [(k, v) for k, v in scope["headers"] if k not in HOP_BY_HOP and k != PRINCIPAL]
    principal = [secret, scope.get(auth.TENANT), scope.get(auth.KEY_ID), scope.get(auth.SCOPE)]
    return [*headers, (PRINCIPAL, json.dumps(principal).encode())]


def _replaying(head: list[bytes], more: bool, receive: Receive) -> Receive:
    """``receive`` with what was already read from it put back in front."""
    first: list[Message] = [{"type": "http.request", "body": b"".join(head), "more_body": more}]

    async def replay() -> Message:
        return first.pop() if first else await receive()

    return replay


async def _helper_failed(scope: Scope, receive: Receive, send: Send) -> None:
    keyed = any(k == b"idempotency-key" for k, _ in scope["headers"])
    retry = ("Retry with the same Idempotency-Key to get the first answer, or to store it "
             "once." if keyed else "Read the session before sending it again (a request "
             "with an Idempotency-Key can be retried as it is).")  # fmt: skip
    response = error_response(
        503, "helper_failed", "the process that serves large bodies failed while it had "
        f"this request: it may or may not have been stored. {retry}",
        headers={"Retry-After": "1"},
    )  # fmt: skip
    await response(scope, receive, send)
