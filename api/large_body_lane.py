"""Large request bodies are handled by the helper server, not by this process.

An ASGI middleware, innermost: the body has passed the host, CORS and JSON
checks, the API key (``api.auth``), the client's request cap and the body's
size and time limits (``api.limits.BodyLimits``, which still bounds what is
passed on).  A command whose body is at least the threshold is streamed,
as it arrives, to the helper (``api.helper_server``) over its Unix socket,
with the caller's tenant, key and scope in one header the helper trusts on
that socket only; the helper's answer is streamed back as it is.  Why:
``api.helper_server``.

- Until the helper answers (starting, or restarting after it died) the body
  is served here, as without a lane: nothing was sent, so nothing can be
  stored twice.
- If the helper fails once it has the request, whether it stored the
  command is unknown: ``503 helper_failed``, and a retry with the same
  ``Idempotency-Key`` returns the first answer or stores it once.
- Every answer from the helper carries ``ctxstore-lane: helper``.

The bytes are passed on with asyncio's own streams, one connection per
request: this process's share of a large body is then what uvicorn costs to
receive it and one socket write per chunk.  An HTTP client library cost
several times that per chunk, and a flood of 8 MB bodies kept this process's
event loop half busy (``scripts/bench_limits.py``).  h11 (uvicorn's parser)
reads the helper's answer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
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
OUR_OWN = (b"access-control-", b"vary")
ANSWER_TIMEOUT = 600.0  # seconds: a command may wait on a summarizer; a dead helper ends it
READ_SIZE = 64 * 1024


class HelperFailed(Exception):
    """The helper went away, or answered nonsense, once it had the request."""


class Lane:
    """The helper and the threshold; stopped with the app."""

    def __init__(self, helper: HelperServer, threshold: int) -> None:
        self.helper, self.threshold = helper, threshold

    def start(self) -> None:
        self.helper.ensure()

    async def ready(self) -> bool:
        """Whether the helper takes connections now (``/health`` shows it)."""
        try:
            _, writer = await asyncio.open_unix_connection(self.helper.socket)
        except OSError:
            return False
        writer.close()
        return True

    async def close(self) -> None:
        self.helper.stop()


class LargeBodyLane:
    def __init__(self, app: ASGIApp, lane: Lane) -> None:
        self.app, self.lane = app, lane

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in METHODS:
            await self.app(scope, receive, send)
            return
        threshold = self.lane.threshold
        length = content_length(scope)
        if length is not None and length < threshold:
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
        self.lane.helper.ensure()
        try:
            reader, writer = await asyncio.open_unix_connection(self.lane.helper.socket)
        except OSError:  # not up yet: served here, with what was read so far
            await self.app(scope, _replaying(head, more, receive), send)
            return
        try:
            try:
                await _pass_on(scope, head, more, receive, writer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # it may have answered before the whole body was in: read on
            status, headers, answer = await asyncio.wait_for(_answer(reader, scope),
                                                             ANSWER_TIMEOUT)  # fmt: skip
        except ConnectionAbortedError:
            return  # the client went away: the helper saw a cut body and stored nothing
        except (OSError, HelperFailed, TimeoutError):
            await _helper_failed(scope, receive, send)
            return
        finally:
            writer.close()
        await send({"type": "http.response.start", "status": status,
                    "headers": [*headers, SERVED_BY]})  # fmt: skip
        await send({"type": "http.response.body", "body": answer})


async def _pass_on(scope: Scope, head: list[bytes], more: bool, receive: Receive,
                   writer: asyncio.StreamWriter) -> None:  # fmt: skip
    """The request, its body as it arrives (chunked if the client's was)."""
    chunked = content_length(scope) is None
    target = scope.get("raw_path") or scope["path"].encode()
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    lines = [scope["method"].encode() + b" " + target + b" HTTP/1.1"]
    lines += [k + b": " + v for k, v in _request_headers(scope)]
    lines += [b"transfer-encoding: chunked"] if chunked else []
    writer.write(b"\r\n".join([*lines, b"connection: close", b"", b""]))

    def put(chunk: bytes) -> None:
        if not chunked:
            writer.write(chunk)
        elif chunk:
            writer.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))

    for chunk in head:
        put(chunk)
    while more:
        await writer.drain()
        message = await receive()  # BodyLimits' bounds: a refusal ends the forward
        if message["type"] != "http.request":
            raise ConnectionAbortedError("the client went away mid-body")
        put(message.get("body", b""))
        more = message.get("more_body", False)
    if chunked:
        writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _answer(reader: asyncio.StreamReader,
                  scope: Scope) -> tuple[int, list[tuple[bytes, bytes]], bytes]:  # fmt: skip
    """The helper's status, headers (those passed back) and body."""
    parser = h11.Connection(h11.CLIENT)
    parser.send(h11.Request(method=scope["method"], target="/",
                            headers=[("host", "helper"), ("content-length", "0")]))  # fmt: skip
    parser.send(h11.EndOfMessage())  # the request's bytes went out above, not through h11
    status, headers, body = 0, [], bytearray()
    while True:
        try:
            event: Any = parser.next_event()
        except h11.RemoteProtocolError as exc:
            raise HelperFailed(str(exc)) from None
        if event is h11.NEED_DATA:
            parser.receive_data(await reader.read(READ_SIZE))
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


def _request_headers(scope: Scope) -> list[tuple[bytes, bytes]]:
    """The caller's headers, minus framing and any principal it claimed, plus ours."""
    headers = [(k, v) for k, v in scope["headers"] if k not in HOP_BY_HOP and k != PRINCIPAL]
    principal = [scope.get(auth.TENANT), scope.get(auth.KEY_ID), scope.get(auth.SCOPE)]
    return [*headers, (PRINCIPAL, json.dumps(principal).encode())]


def _replaying(head: list[bytes], more: bool, receive: Receive) -> Receive:
    """``receive`` with what was already read from it put back in front."""
    first: list[Message] = [{"type": "http.request", "body": b"".join(head), "more_body": more}]

    async def replay() -> Message:
        return first.pop() if first else await receive()

    return replay


async def _helper_failed(scope: Scope, receive: Receive, send: Send) -> None:
    response = error_response(
        503, "helper_failed", "the process that serves large bodies failed while it had "
        "this request: it may or may not have been stored. Retry with the same "
        "Idempotency-Key to get the first answer, or to store it once.",
        headers={"Retry-After": "1"},
    )  # fmt: skip
    await response(scope, receive, send)
