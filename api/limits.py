"""How much one request may ask of the server, and the checks that hold it to that.

Every limit is an environment variable (README, *Configuration*), read once
when the app is built.  The request body is bounded by ``BodyLimits``, an ASGI
middleware: a ``Content-Length`` over the limit is refused before a byte of
the body is read, a chunked body is counted as it arrives and refused as soon
as it passes the limit (so at most one chunk more than the limit is ever
held), and a body that has not fully arrived within the read timeout is cut
off with ``408``.  Once parsed, ``check_json`` refuses JSON nested deeper than
the limit (``400``) and ``check_content`` a node whose content is larger than
the node limit (``413``); both run before anything is stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import error_response

MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 8 * MB
    max_node_bytes: int = 4 * MB
    max_json_depth: int = 64
    body_timeout: float = 30.0
    max_requests_per_client: int = 64
    max_streams_per_client: int = 8
    stream_poll: float = 0.25

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        """The defaults, overridden by ``CTXSTORE_*`` variables in ``env`` (``Settings.env``;
        ``os.environ`` if None); a bad value stops start-up."""
        env = os.environ if env is None else env
        return cls(
            max_body_bytes=_env(env, "CTXSTORE_MAX_BODY_BYTES", cls.max_body_bytes, int),
            max_node_bytes=_env(env, "CTXSTORE_MAX_NODE_BYTES", cls.max_node_bytes, int),
            max_json_depth=_env(env, "CTXSTORE_MAX_JSON_DEPTH", cls.max_json_depth, int),
            body_timeout=_env(env, "CTXSTORE_BODY_TIMEOUT", cls.body_timeout, float),
            max_requests_per_client=_env(
                env, "CTXSTORE_MAX_REQUESTS_PER_CLIENT", cls.max_requests_per_client, int
            ),
            max_streams_per_client=_env(
                env, "CTXSTORE_MAX_STREAMS_PER_CLIENT", cls.max_streams_per_client, int
            ),
            stream_poll=_env(env, "CTXSTORE_STREAM_POLL", cls.stream_poll, float),
        )


def _env(env: Mapping[str, str], name: str, default: Any, kind: type) -> Any:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if value <= 0:
        raise ValueError(f"{name}={raw!r} must be above 0")
    return value


class RequestRefused(Exception):
    """A limit refused the request; raised where it is noticed, answered by ``BodyLimits``."""

    def __init__(self, status: int, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def response(self) -> Any:
        return error_response(self.status, self.code, self.message, self.details)


def body_too_large(limit: int) -> RequestRefused:
    message = f"the request body is larger than {limit} bytes"
    return RequestRefused(413, "body_too_large", message, limit=limit)


async def refused(request: Request, exc: Exception) -> Any:
    assert isinstance(exc, RequestRefused)
    return exc.response()


HANDLERS: dict[Any, Any] = {RequestRefused: refused}


class BodyLimits:
    """Bound the size of a request body and the time it may take to arrive."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.max_body_bytes
        length = content_length(scope)
        if length is not None and length > limit:
            await body_too_large(limit).response()(scope, receive, send)
            return
        deadline = time.monotonic() + self.limits.body_timeout
        received, complete = 0, False

        async def bounded_receive() -> Message:
            nonlocal received, complete
            if complete:  # the body is in: what is left is waiting for a disconnect
                return await receive()
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    message = await receive()
            except TimeoutError:
                raise RequestRefused(408, "request_timeout",
                                     f"the request body did not arrive within "
                                     f"{self.limits.body_timeout:g} s") from None  # fmt: skip
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise body_too_large(limit)
                complete = not message.get("more_body", False)
            else:
                complete = True
            return message

        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracked_send)
        except RequestRefused as exc:
            if started:
                raise
            await exc.response()(scope, receive, send)


def content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


# ------------------------------------------------------------- parsed bodies

_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")


def json_depth(raw: bytes) -> int:
    """How deeply ``raw`` nests arrays and objects, at C speed: escapes and then strings
    are cut out, and the rest is a walk of +1 and -1 steps (60 ms for 8 MB at worst)."""
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in raw else raw
    outside_strings = b"".join(unescaped.split(b'"')[::2])
    steps = array("b", outside_strings.translate(_STEPS, _NOT_BRACKETS))
    return max(accumulate(steps), default=0)


def _limits(request: Request) -> Limits:
    limits = getattr(request.app.state, "limits", None)
    return limits if isinstance(limits, Limits) else Limits()


def check_json(request: Request, raw: bytes) -> None:
    """Refuse a body nested deeper than the limit, before it is parsed."""
    limit = _limits(request).max_json_depth
    # Cannot nest deeper than it has brackets: most bodies never need the walk.
    if raw.count(b"[") + raw.count(b"{") > limit and json_depth(raw) > limit:
        raise json_too_deep(limit)


def check_depth(request: Request, parsed: Any) -> None:
    """``check_json`` for a body already parsed."""
    limit = _limits(request).max_json_depth
    if parsed_depth(parsed, limit) > limit:
        raise json_too_deep(limit)


def json_too_deep(limit: int) -> RequestRefused:
    message = f"the body nests arrays/objects deeper than {limit}"
    return RequestRefused(400, "json_too_deep", message, limit=limit)


def parsed_depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests lists and dicts (``json_depth`` of its JSON), counted
    no further than one past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if not isinstance(current, list | dict):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = current.values() if isinstance(current, dict) else current
        stack.extend((child, depth + 1) for child in children if isinstance(child, list | dict))
    return deepest


def _size(value: Any) -> int:
    """UTF-8 bytes of a text, else of the value as JSON (a text is measured without
    serialising it: megabytes of escaping would hold the GIL for tens of ms)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def check_content(request: Request, body: BaseModel) -> None:
    """Refuse a node whose content (input, output and metadata) is over the limit."""
    limit = _limits(request).max_node_bytes
    nodes = getattr(body, "nodes", None)
    for index, node in enumerate(nodes if isinstance(nodes, list) else [body]):
        if not any(hasattr(node, field) for field in ("input", "output")):
            continue
        size = sum(_size(getattr(node, f, None)) for f in ("input", "output", "metadata"))
        if size > limit:
            where = "" if nodes is None else f"nodes[{index}]: "
            details = {"limit": limit, "size": size, **({} if nodes is None else {"index": index})}
            raise RequestRefused(413, "content_too_large",
                                 f"{where}the node's content is {size} bytes, over the "
                                 f"limit of {limit}", **details)  # fmt: skip
