"""``GET /metrics`` (Prometheus text) and ``GET /ready`` (readiness), and their settings.

- ``CTXSTORE_METRICS_ACCESS``: ``loopback`` (default: a scraper on this
  machine needs no key, any other needs a key of ``CTXSTORE_METRICS_SCOPE``),
  ``key`` (always a key) or ``open`` (no key: a private network's scraper).
- ``CTXSTORE_METRICS_SCOPE``: ``read``, ``write`` or ``admin`` (default): the
  figures are the whole server's, every tenant's together.
- ``CTXSTORE_LOG_FORMAT=json``: JSON-lines logs (``telemetry.logs``).
- ``CTXSTORE_READY_MAX_LAG``: events a partition's projection may be behind
  for ``/ready`` to answer 200 (default 1000).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from api import responses
from api.openapi import Endpoint
from projections.backlog import backlog
from service.readiness import readiness
from service.runtime import Runtime
from telemetry import exposition
from telemetry.settings import json_logs

log = logging.getLogger("ctxstore.api")
ACCESS = ("loopback", "key", "open")
SCOPES = ("read", "write", "admin")
LAG_CAP = 1_000_000  # events counted at most per partition in a scrape


@dataclass(frozen=True)
class Operations:
    metrics_access: str = "loopback"
    metrics_scope: str = "admin"
    ready_max_lag: int = 1000
    json_logs: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Operations:
        access = env.get("CTXSTORE_METRICS_ACCESS", "").strip().lower() or "loopback"
        scope = env.get("CTXSTORE_METRICS_SCOPE", "").strip().lower() or "admin"
        lag = env.get("CTXSTORE_READY_MAX_LAG", "").strip() or "1000"
        if access not in ACCESS:
            raise ValueError(f"CTXSTORE_METRICS_ACCESS={access!r}: one of {', '.join(ACCESS)}")
        if scope not in SCOPES:
            raise ValueError(f"CTXSTORE_METRICS_SCOPE={scope!r}: one of {', '.join(SCOPES)}")
        if not lag.isdigit():
            raise ValueError(f"CTXSTORE_READY_MAX_LAG={lag!r} is not a count of events")
        return cls(access, scope, int(lag), json_logs(env))


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def _lag(runtime: Runtime) -> Iterator[Any]:
    try:
        lag = backlog(runtime.processor, cap=LAG_CAP)
    except Exception:  # the database is away: the process's own figures still answer
        log.warning("the projection's lag could not be read for /metrics", exc_info=True)
        return
    yield exposition.gauges(
        "ctxstore_projection_lag_events",
        "Events of its own a partition's stored projection has not applied yet "
        "(read from the database at scrape time)", "partition", lag,
    )  # fmt: skip


async def metrics(request: Request) -> Response:
    runtime = _runtime(request)
    text = await run_in_threadpool(exposition.render, lambda: _lag(runtime))
    return Response(text, media_type=exposition.CONTENT_TYPE)


async def ready(request: Request) -> Response:
    ops: Operations = request.app.state.ops
    state: dict[str, Any] = await run_in_threadpool(readiness, _runtime(request),
                                                    ops.ready_max_lag)  # fmt: skip
    body = {"status": "ready" if state["ready"] else "not_ready", **state}
    return JSONResponse(body, 200 if state["ready"] else 503)


ENDPOINTS = [
    Endpoint("GET", "/ready", ready, "Readiness: migrations ran and the projection is close "
             "(503 until then)", errors=(503,), response=responses.Ready),
]  # fmt: skip
