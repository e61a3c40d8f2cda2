"""The asyncio client: ``AsyncClient(base_url, api_key=...)``, the same methods, awaited."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
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


def _method(build: Callable[P, Request[T]]) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(build(*args, **kwargs))

    method.__name__, method.__doc__ = build.__name__, build.__doc__
    method.__wrapped__ = build  # type: ignore[attr-defined]  # help() shows the signature
    return method


class AsyncClient:
    """ctxstore over HTTP, for asyncio: ``Client``'s methods, each a coroutine."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._owned = http is None
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self._headers = base_headers(api_key, headers)

    async def send(self, request: Request[T]) -> T:
        """Send ``request``; a read or keyed command meeting a closed connection goes again."""
        try:
            response = await self._send(request)
        except CLOSED as error:
            if not retried_once(request, error):
                raise
            response = await self._send(request)
        return parse(request, response)

    async def _send(self, request: Request[Any]) -> httpx.Response:
        return await self._http.request(
            request.method,
            request.path,
            json=request.json,
            params=request.params,
            headers={**self._headers, **call_headers(request)},
        )

    async def aclose(self) -> None:
        if self._owned:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

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

    async def iter_sessions(self, *, page: int = 100) -> AsyncIterator[sr.SessionSummary]:
        after: str | None = None
        while True:
            answer = await self.list_sessions(limit=page, after=after)
            for row in answer.sessions:
                yield row
            if answer.next is None:
                return
            after = answer.next

    async def iter_events(
        self, session_id: str, *, after: int = 0, page: int = 1000
    ) -> AsyncIterator[sr.StoredEvent]:
        cursor: int | None = after
        while cursor is not None:
            answer = await self.events(session_id, after=cursor, limit=page)
            for event in answer.events:
                yield event
            cursor = answer.next

    async def stream(
        self, session_id: str, *, once: bool = False, interval: float | None = None
    ) -> AsyncIterator[cr.StreamEvent]:
        request = q.stream(session_id, once=once, interval=interval)
        async with self._http.stream(
            "GET",
            request.path,
            params=request.params,
            headers={**self._headers, "Accept": "text/event-stream"},
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                parse(request, response)
            parser = SSEParser()
            async for line in response.aiter_lines():
                event = parser.feed(line)
                if event is not None:
                    yield event
