"""Per-client caps on what is open at once: requests in flight, and SSE streams.

One client (``api.principal.client_identity``: its API key, else its address)
may hold at most N slots of each kind; one more is answered ``429`` with
``Retry-After`` and costs the server nothing.  Slots are counted in this
process (each uvicorn worker counts its own) and always handed back, however
the request ends.
"""

from __future__ import annotations

from collections import Counter

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import error_response
from api.principal import client_identity


class ClientSlots:
    """At most ``limit`` held slots per client; only the event loop touches it."""

    def __init__(self, limit: int, what: str, code: str, retry_after: int) -> None:
        self.limit, self.what, self.code, self.retry_after = limit, what, code, retry_after
        self.held: Counter[str] = Counter()

    def acquire(self, client: str) -> bool:
        if self.held[client] >= self.limit:
            return False
        self.held[client] += 1
        return True

    def release(self, client: str) -> None:
        self.held[client] -= 1
        if self.held[client] <= 0:
            del self.held[client]

    def refusal(self) -> JSONResponse:
        return error_response(
            429, self.code, f"this client already has {self.limit} {self.what} open; "
            "retry when one has finished", {"limit": self.limit},
            headers={"Retry-After": str(self.retry_after)},
        )  # fmt: skip


def request_slots(limit: int) -> ClientSlots:
    return ClientSlots(limit, "requests", "too_many_requests", 1)


def stream_slots(limit: int) -> ClientSlots:
    return ClientSlots(limit, "streams", "too_many_streams", 5)


class ClientConcurrency:
    """Hold one request slot for the whole of each HTTP request."""

    def __init__(self, app: ASGIApp, slots: ClientSlots) -> None:
        self.app, self.slots = app, slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = client_identity(scope)
        if not self.slots.acquire(client):
            await self.slots.refusal()(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.slots.release(client)
