"""The blocking client: ``Client(base_url, api_key=...)``, one method per route."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx
from pydantic import BaseModel

from ctxstore_client import commands as c
from ctxstore_client import context_responses as cr
from ctxstore_client import node_commands as nc
from ctxstore_client import queries as q
from ctxstore_client import session_responses as sr
from ctxstore_client.request import Request
from ctxstore_client.transport import (
    CLOSED,
    DEFAULT_URL,
    SSEParser,
    base_headers,
    call_headers,
    parse,
    retried_once,
)

P = ParamSpec("P")
T = TypeVar("T", bound=BaseModel)


def _method(build: Callable[P, Request[T]]) -> Callable[Concatenate[Client, P], T]:
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(build(*args, **kwargs))

    method.__name__, method.__doc__ = build.__name__, build.__doc__
    method.__wrapped__ = build  # type: ignore[attr-defined]  # help() shows the signature
    return method


class Client:
    """ctxstore over HTTP.  Every command takes ``idempotency_key=``; errors raise
    ``ctxstore_client.CtxStoreError`` subclasses; answers are its response models."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        """``http`` is an httpx client to send through (a test client, a custom transport)."""
        self._owned = http is None
        self._http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self._headers = base_headers(api_key, headers)

    def send(self, request: Request[T]) -> T:
        """Send ``request``; a read or keyed command meeting a closed connection goes again."""
        try:
            response = self._send(request)
        except CLOSED as error:
            if not retried_once(request, error):
                raise
            response = self._send(request)
        return parse(request, response)

    def _send(self, request: Request[Any]) -> httpx.Response:
        return self._http.request(
            request.method,
            request.path,
            json=request.json,
            params=request.params,
            headers={**self._headers, **call_headers(request)},
        )

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    start_session = _method(c.start_session)
    append_node = _method(nc.append_node)
    append_nodes = _method(nc.append_nodes)
    retry = _method(nc.retry)
    edit = _method(nc.edit)
    checkout = _method(nc.checkout)
    branch = _method(c.branch)
    pin = _method(c.pin)
    unpin = _method(c.unpin)
    attach = _method(c.attach)
    merge = _method(c.merge)
    record_usage = _method(c.record_usage)
    start_run = _method(c.start_run)
    finish_run = _method(c.finish_run)
    switch_model = _method(c.switch_model)
    compact = _method(c.compact)
    declare_tools = _method(c.declare_tools)
    configure_compaction = _method(c.configure_compaction)
    erase_session = _method(c.erase_session)
    erase_tenant = _method(c.erase_tenant)
    list_sessions = _method(q.list_sessions)
    get_session = _method(q.get_session)
    nodes = _method(q.nodes)
    events = _method(q.events)
    dag = _method(q.dag)
    context = _method(q.context)
    commit = _method(q.commit)
    commit_transitions = _method(q.commit_transitions)
    tools = _method(q.tools)
    render = _method(q.render)
    timeline = _method(q.timeline)
    explain = _method(q.explain)
    recall = _method(q.recall)
    occupancy = _method(q.occupancy)
    budget = _method(q.budget)
    models = _method(q.models)
    erasures = _method(q.erasures)
    health = _method(q.health)
    ready = _method(q.ready)
    openapi = _method(q.openapi)

    def iter_sessions(self, *, page: int = 100) -> Iterator[sr.SessionSummary]:
        """Every session, oldest first, following the pages' cursors."""
        after: str | None = None
        while True:
            answer = self.list_sessions(limit=page, after=after)
            yield from answer.sessions
            if answer.next is None:
                return
            after = answer.next

    def iter_events(
        self, session_id: str, *, after: int = 0, page: int = 1000
    ) -> Iterator[sr.StoredEvent]:
        """A session's events after ``after``, oldest first, following ``next``."""
        cursor: int | None = after
        while cursor is not None:
            answer = self.events(session_id, after=cursor, limit=page)
            yield from answer.events
            cursor = answer.next

    def stream(
        self, session_id: str, *, once: bool = False, interval: float | None = None
    ) -> Iterator[cr.StreamEvent]:
        """``/stream`` as events (``ctxstore_client.event_data(e)`` is its JSON payload)."""
        request = q.stream(session_id, once=once, interval=interval)
        with self._http.stream(
            "GET",
            request.path,
            params=request.params,
            headers={**self._headers, "Accept": "text/event-stream"},
        ) as response:
            if response.status_code >= 400:
                response.read()
                parse(request, response)
            parser = SSEParser()
            for line in response.iter_lines():
                event = parser.feed(line)
                if event is not None:
                    yield event
