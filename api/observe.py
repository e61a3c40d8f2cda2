"""Every request, measured and logged: the outermost ASGI middleware.

It gives the request an id (a sane ``X-Request-Id`` from the caller, else a
new one) and echoes it; when the answer has gone it records the route
template's latency and status (``telemetry.probes``), the command's outcome
for a command route (stored, replayed, refused with its error code), a
limit's refusal by the limit's code, and, with JSON logs on, one access
line.  Labels and log fields are route templates and codes, never a path.

The large-body helper (``api.helper_server``) is this app too: there the
request was measured by the API process that passed it on, so the helper
counts only the command (it alone knows whether it was replayed), and the
API process skips the command of an answer the helper gave.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from telemetry import logs, probes, tracing

INFO = "ctxstore_observed"  # the scope's key for this request's ``Observed``
HEADER = b"x-request-id"
SANE_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")
COMMAND_METHODS = ("POST", "PUT", "PATCH", "DELETE")
LIMIT_STATUSES = (408, 413, 415, 429)
CODE_BYTES = 4096  # of an error body: where its machine code is read from
LANE_HEADER = b"ctxstore-lane"


@dataclass
class Observed:
    """What the handlers tell the middleware about a request (``replayed``)."""

    request_id: str
    replayed: bool = False
    trace_id: str | None = None


def mark_replayed(scope: Scope) -> None:
    """The command's answer is an ``Idempotency-Key``'s earlier one: nothing was stored."""
    info = scope.get(INFO)
    if isinstance(info, Observed):
        info.replayed = True


def request_id_of(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == HEADER and SANE_ID.fullmatch(value):
            return str(value.decode("ascii"))
    return uuid.uuid4().hex


def route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if isinstance(path, str) and path else "unmatched"


def command_of(scope: Scope) -> str:
    endpoint = scope.get("endpoint")
    return str(getattr(endpoint, "__name__", "unknown"))


def error_code(body: bytes) -> str:
    try:
        code = json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return "unknown"
    return code if isinstance(code, str) and len(code) <= 64 else "unknown"


class Observe:
    def __init__(self, app: ASGIApp, helper: bool = False, json_logs: bool = False) -> None:
        """``helper``: this app is the large-body helper (see the module's doc)."""
        self.app, self.helper, self.json_logs = app, helper, json_logs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        traced = tracing.enabled() and not self.helper  # the helper's work: the parent's span
        if scope["type"] != "http" or not (probes.enabled() or self.json_logs or traced):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        info = Observed(request_id_of(scope))
        scope[INFO] = info
        status, lane, body = 500, False, bytearray()
        echo = (HEADER, info.request_id.encode("ascii"))

        async def observed_send(message: Message) -> None:
            nonlocal status, lane
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", ()))
                lane = any(name == LANE_HEADER for name, _ in headers)
                message = {**message, "headers": [*headers, echo]}
            elif message["type"] == "http.response.body" and status >= 400:
                if len(body) < CODE_BYTES:
                    body.extend(message.get("body", b"")[: CODE_BYTES - len(body)])
            await send(message)

        if not traced:
            try:
                await self.app(scope, receive, observed_send)
            finally:
                self._record(scope, info, status, lane, bytes(body), time.perf_counter() - started)
            return
        with tracing.server_span(scope.get("headers", []), scope["method"]) as span:
            info.trace_id = tracing.trace_id(span)
            try:
                await self.app(scope, receive, observed_send)
            finally:
                route = route_of(scope)
                span.update_name(f"{scope['method']} {route}")
                tracing.set_attributes(span, http__request__method=scope["method"],
                                       http__route=route, http__response__status_code=status,
                                       ctxstore__request_id=info.request_id)  # fmt: skip
                self._record(scope, info, status, lane, bytes(body), time.perf_counter() - started)

    def _record(self, scope: Scope, info: Observed, status: int, lane: bool, body: bytes,
                seconds: float) -> None:  # fmt: skip
        route, method = route_of(scope), scope["method"]
        code = error_code(body) if status >= 400 else ""
        command = outcome = None
        if method in COMMAND_METHODS and route != "unmatched" and not lane:
            command = command_of(scope)
            if status < 400:
                outcome = "replayed" if info.replayed else "stored"
            else:
                outcome = "refused" if status < 500 else "failed"
            probes.command(command, outcome, code)
        if not self.helper:
            probes.http_request(route, method, status, seconds)
            if status in LIMIT_STATUSES:
                probes.limit_refused(status, code)
            if self.json_logs:
                params = scope.get("path_params") or {}
                logs.access({
                    "request_id": info.request_id, "route": route, "method": method,
                    "status": status, "latency_ms": round(seconds * 1000, 3),
                    "tenant": scope.get("ctxstore_tenant"), "session_id": params.get("sid"),
                    "command": command, "outcome": outcome, "code": code or None,
                    "trace_id": info.trace_id,
                })  # fmt: skip


def observed(helper: bool, json_logs: bool) -> Any:
    from starlette.middleware import Middleware

    return Middleware(Observe, helper=helper, json_logs=json_logs)
