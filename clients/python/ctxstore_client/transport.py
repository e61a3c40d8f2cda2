"""What both clients share besides the routes: headers, errors, parsing, SSE lines."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ctxstore_client import context_responses as cr
from ctxstore_client.errors import error_for
from ctxstore_client.request import Request

try:  # OpenTelemetry, when the caller has it: its current trace is sent as ``traceparent``
    from opentelemetry import propagate as _propagate
except ImportError:  # pragma: no cover - the client works without it
    _propagate = None  # type: ignore[assignment]

T = TypeVar("T", bound=BaseModel)
DEFAULT_URL = "http://127.0.0.1:8000"


def base_headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"Accept": "application/json", **(extra or {})}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def call_headers(request: Request[Any]) -> dict[str, str]:
    headers = {"Idempotency-Key": request.idempotency_key} if request.idempotency_key else {}
    if _propagate is not None:  # the caller's trace goes on into the server's spans
        _propagate.inject(headers)
    return headers


# What a connection the server closed meanwhile looks like: an idle keep-alive it
# timed out (uvicorn after 5 s) as the request went out on it.
CLOSED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def retried_once(request: Request[Any], error: Exception) -> bool:
    """Whether to send ``request`` again after ``error``, once: a read, or a command
    with an ``Idempotency-Key`` (a retry of one that was stored answers as it did),
    that met a connection the server closed.  A command without a key is not sent
    twice: it may have been stored."""
    safe = request.method in ("GET", "HEAD") or request.idempotency_key is not None
    return safe and isinstance(error, CLOSED)


def parse(request: Request[T], response: httpx.Response) -> T:
    """The response as the route's model, or the API's error as an exception."""
    if response.status_code >= 400:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        raise error_for(response.status_code, body, response.headers.get("Retry-After"))
    return request.model.model_validate(response.json())


class SSEParser:
    """Server-sent event lines in, ``StreamEvent``s out (comments are keep-alives)."""

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.data: list[str] = []

    def feed(self, line: str) -> cr.StreamEvent | None:
        if line == "":
            if not self.data and "event" not in self.fields:
                return None
            event = cr.StreamEvent(
                event=self.fields.get("event", "message"),  # type: ignore[arg-type]
                data="\n".join(self.data),
                id=self.fields.get("id"),
            )
            self.fields, self.data = {}, []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self.data.append(value)
        else:
            self.fields[name] = value
        return None


def event_data(event: cr.StreamEvent) -> Any:
    """An event's JSON payload."""
    return json.loads(event.data)
