"""Server-sent events: a session's occupancy and timeline, pushed as they change.

The stream polls the projections' tracking position every ``interval``
seconds (0.25 by default).  It opens with the session's whole state, as
``event: occupancy`` and ``event: timeline``; ``?once=1`` sends that and
closes.  When the position moves it sends the occupancy if it changed and,
as ``event: timeline_append``, only the timeline entries of commits made
since the last frame: commits never change, so a client appends them to
what it has.  Resending the whole timeline on every change cost a
10,000-commit session a query of every commit and megabytes per frame.
Every blocking runtime call runs in the threadpool, and the loop ends as
soon as the client goes away.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from api import responses as r
from api import schemas as s
from api.auth import tenant_of
from api.openapi import Endpoint
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
    read is the caller's ``tenant``'s (``api.auth``).
    """
    position = runtime.position()
    return (position, runtime.occupancy(sid, tenant)) + runtime.timeline_after(sid, after, tenant)


async def _frames(
    request: Request, runtime: Runtime, sid: str, q: s.StreamQuery, first: State
) -> AsyncIterator[str]:
    position, occupancy, timeline, seen_upto = first
    sent_occupancy = occupancy
    yield frame("occupancy", occupancy, position)
    yield frame("timeline", {"session_id": sid, "commits": timeline}, position)
    if q.once:
        return
    quiet_since = time.monotonic()
    try:
        while not await request.is_disconnected():
            await asyncio.sleep(q.interval)
            now = await run_in_threadpool(runtime.position)
            if now != position:
                position, occupancy, added, seen_upto = await run_in_threadpool(
                    _state, runtime, sid, tenant_of(request), seen_upto
                )
                if occupancy != sent_occupancy:
                    sent_occupancy = occupancy
                    yield frame("occupancy", occupancy, position)
                    quiet_since = time.monotonic()
                if added:
                    yield frame("timeline_append", {"session_id": sid, "commits": added},
                                position)  # fmt: skip
                    quiet_since = time.monotonic()
            if time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"  # a comment: also how a dead peer is noticed
                quiet_since = time.monotonic()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the response has started: report in-band, then stop
        log.exception("stream of session %s failed", sid)
        yield frame("error", {"code": "internal", "message": type(exc).__name__})


async def stream(request: Request) -> Response:
    sid = request.path_params["sid"]
    q = s.parse_query(request, s.StreamQuery)
    runtime: Runtime = request.app.state.runtime
    # Loaded before the response starts, so an unknown session is a plain 404.
    first = await run_in_threadpool(_state, runtime, sid, tenant_of(request))
    return StreamingResponse(
        _frames(request, runtime, sid, q, first),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


ENDPOINTS = [
    Endpoint("GET", "/sessions/{sid}/stream", stream,
             "SSE: occupancy and timeline, then changes: occupancy when it changes, "
             "timeline_append with only the new commits' entries", query=s.StreamQuery,
             media_type="text/event-stream", response=r.StreamEvent),
]  # fmt: skip
