"""Server-sent events: a session's occupancy and timeline, pushed as they change.

The stream opens with the session's whole state, as ``event: occupancy`` and
``event: timeline``; ``?once=1`` sends that and closes.  Then it waits,
costing nothing, until the process's one ``StreamWatcher`` says its session
changed; it then sends the occupancy if it changed and, as
``event: timeline_append``, only the timeline entries of commits made since
the last frame: commits never change, so a client appends them to what it
has.  Resending the whole timeline on every change cost a 10,000-commit
session a query of every commit and megabytes per frame.  ``interval`` is the
least time between two change frames (a burst of writes goes out together).
Every blocking runtime call runs in the threadpool, and the loop ends as soon
as the client goes away.  Each client may hold a limited number of streams
(``429`` with ``Retry-After`` past it).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from api import context_responses as cr
from api import query_params as qp
from api.auth import tenant_of
from api.client_slots import ClientSlots
from api.openapi import Endpoint
from api.principal import client_identity
from api.stream_watcher import StreamWatcher
from domain.rules.redact import mask_reply
from service.runtime import Runtime

log = logging.getLogger("ctxstore.api")

KEEPALIVE_SECONDS = 15.0


def frame(event: str, data: Any, event_id: int | None = None) -> str:
    """One SSE message; the JSON is compact, so it is always a single data line."""
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [f"event: {event}", "data: " + json.dumps(data, separators=(",", ":"))]
    return "\n".join(lines) + "\n\n"


State = tuple[int, dict[str, Any], list[dict[str, Any]], int]


def _state(runtime: Runtime, sid: str, tenant: str, after: int = 0) -> State:
    """Position first: anything applied after it is caught by the next poll.

    The timeline part is the entries after log position ``after``, and the
    position of the last of them, which the next poll starts from.  Every
    read is the caller's ``tenant``'s (``api.auth``), masked when the policy
    redacts secrets.
    """
    position = runtime.position()
    state = (position, runtime.occupancy(sid, tenant)) + runtime.timeline_after(sid, after, tenant)
    if not runtime.policy.redact_secrets:
        return state
    # masked as ``/occupancy`` and ``/timeline`` mask them (``api.routes_queries``)
    return state[0], mask_reply(state[1]), mask_reply(state[2]), state[3]


async def _frames(
    runtime: Runtime, sid: str, tenant: str, q: qp.StreamQuery, first: State, wake: asyncio.Event
) -> AsyncIterator[str]:
    position, occupancy, timeline, seen_upto = first
    sent_occupancy = occupancy
    yield frame("occupancy", occupancy, position)
    yield frame("timeline", {"session_id": sid, "commits": timeline}, position)
    if q.once:
        return
    try:
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    await wake.wait()
            except TimeoutError:
                yield ": keep-alive\n\n"  # a comment: also how a dead peer is noticed
                continue
            wake.clear()
            position, occupancy, added, seen_upto = await run_in_threadpool(
                _state, runtime, sid, tenant, seen_upto
            )
            if occupancy != sent_occupancy:
                sent_occupancy = occupancy
                yield frame("occupancy", occupancy, position)
            if added:
                yield frame("timeline_append", {"session_id": sid, "commits": added}, position)
            await asyncio.sleep(q.interval)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the response has started: report in-band, then stop
        log.exception("stream of session %s failed", sid)
        yield frame("error", {"code": "internal", "message": type(exc).__name__})


class _HeldStream(StreamingResponse):
    """A stream that hands back its slot and subscription however it ends."""

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None]) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


async def stream(request: Request) -> Response:
    sid = request.path_params["sid"]
    q = qp.parse_query(request, qp.StreamQuery)
    runtime: Runtime = request.app.state.runtime
    watcher: StreamWatcher = request.app.state.stream_watcher
    slots: ClientSlots = request.app.state.stream_slots
    client = client_identity(request.scope)
    if not q.once and not slots.acquire(client):
        return slots.refusal()
    # Subscribed before the state is read, so no change slips in between.
    wake = asyncio.Event() if q.once else watcher.subscribe(sid)

    def release() -> None:
        watcher.unsubscribe(sid, wake)
        if not q.once:
            slots.release(client)

    try:
        # Loaded before the response starts, so an unknown session is a plain 404.
        first = await run_in_threadpool(_state, runtime, sid, tenant_of(request))
    except BaseException:
        release()
        raise
    return _HeldStream(_frames(runtime, sid, tenant_of(request), q, first, wake), release)


ENDPOINTS = [
    Endpoint("GET", "/sessions/{sid}/stream", stream,
             "SSE: occupancy and timeline, then changes: occupancy when it changes, "
             "timeline_append with only the new commits' entries", query=qp.StreamQuery,
             media_type="text/event-stream", response=cr.StreamEvent),
]  # fmt: skip
