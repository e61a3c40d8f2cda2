"""What keeps a web page the user happens to visit from driving a local ctxstore.

Three doors, all at the edge of the app:

- **Host header** (DNS rebinding: a hostile name re-pointed at 127.0.0.1 makes
  the browser treat the API as same-origin).  Only allowed names pass; by
  default ``localhost``, the host the server was bound to and any IP literal
  (a rebinding attack needs a name, so an address is never one).
- **Commands must say JSON.**  A cross-site ``fetch``/form ``POST`` goes out
  without a CORS preflight only with a "simple" content type (``text/plain``,
  form encodings) or none; a ``POST`` not declared ``application/json`` is
  ``415``, so such a request never runs.  ``PUT``/``PATCH``/``DELETE`` are
  always preflighted by browsers; they are held to JSON when they carry a body.
- **CORS**: no origin is allowed unless configured; a preflight from any other
  origin is refused, so a browser never sends the real request.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import error_response

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("", "0.0.0.0", "::")
COMMAND_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def _split(raw: str) -> tuple[str, ...]:
    return tuple(part.strip().lower() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class BrowserSafety:
    """``allowed_hosts`` None is the default rule; ``("*",)`` allows any Host."""

    allowed_hosts: tuple[str, ...] | None = None
    bind_host: str = ""
    cors_origins: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BrowserSafety:
        """``CTXSTORE_ALLOWED_HOSTS``, ``_BIND_HOST``, ``_CORS_ORIGINS`` from ``env``
        (``Settings.env``; ``os.environ`` if None)."""
        env = os.environ if env is None else env
        hosts = env.get("CTXSTORE_ALLOWED_HOSTS", "").strip()
        return cls(
            allowed_hosts=_split(hosts) if hosts else None,
            bind_host=env.get("CTXSTORE_BIND_HOST", "").strip().lower(),
            cors_origins=tuple(o.rstrip("/") for o in _split(env.get("CTXSTORE_CORS_ORIGINS", ""))),
        )

    def host_allowed(self, host: str) -> bool:
        if self.allowed_hosts is None:
            return host in LOOPBACK_NAMES or host == self.bind_host or _is_address(host)
        return any(
            pattern == "*"
            or host == pattern
            or (pattern.startswith("*.") and host.endswith(pattern[1:]))
            for pattern in self.allowed_hosts
        )


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_of(header: str) -> str | None:
    """The name or address in a Host header, without port or IPv6 brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        return header[1:end] if end > 1 else None
    name = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    return name or None


class AllowedHosts:
    def __init__(self, app: ASGIApp, settings: BrowserSafety) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = host_of(Headers(scope=scope).get("host", ""))
            if host is None or not self.settings.host_allowed(host):
                message = f"Host {host!r} is not served here; see CTXSTORE_ALLOWED_HOSTS"
                await error_response(400, "bad_host", message)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def routed(routes: Sequence[BaseRoute], scope: Scope) -> bool:
    """Whether one of ``routes`` takes the request (path and method)."""
    return any(route.matches(scope)[0] is Match.FULL for route in routes)


class JsonCommands:
    """Refuse a command whose body is not declared JSON (``415``).

    Only a request some route takes is held to it: an unknown path stays a 404.
    """

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app, self.routes = app, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        command = scope["type"] == "http" and scope["method"] in COMMAND_METHODS
        if command and routed(self.routes, scope):
            headers = Headers(scope=scope)
            has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
            if (scope["method"] == "POST" or has_body) and not is_json(
                headers.get("content-type", "")
            ):
                await error_response(
                    415, "unsupported_media_type",
                    f"{scope['method']} needs Content-Type: application/json",
                    {"content_type": headers.get("content-type")},
                )(scope, receive, send)  # fmt: skip
                return
        await self.app(scope, receive, send)


def middleware(settings: BrowserSafety, routes: Sequence[BaseRoute]) -> list[Middleware]:
    """Host check outermost, then CORS (so a preflight is answered before anything else,
    and a refusal below carries the CORS headers its page needs to read it)."""
    return [
        Middleware(AllowedHosts, settings=settings),
        Middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                   allow_methods=["GET", *COMMAND_METHODS],
                   allow_headers=["Authorization", "Content-Type", "Idempotency-Key",
                                  "Last-Event-ID"],
                   expose_headers=["Retry-After"], max_age=600),
        Middleware(JsonCommands, routes=routes),
    ]  # fmt: skip
