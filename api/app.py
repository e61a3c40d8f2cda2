"""The Starlette application.

``create_app(runtime)`` serves an existing runtime (the caller closes it,
unless ``close_runtime``); ``create_app()`` is ``api.bootstrap.bootstrap()``:
settings loaded once from the environment, a runtime opened on them and
closed at shutdown (``uvicorn api.app:create_app --factory`` still works).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from api import (
    errors,
    openapi,
    responses,
    routes_commands,
    routes_erasure,
    routes_ops,
    routes_queries,
    routes_ui,
    sse,
)
from api.auth import AuthMiddleware
from api.browser_safety import BrowserSafety
from api.browser_safety import middleware as browser_middleware
from api.client_slots import ClientConcurrency, request_slots, stream_slots
from api.gc_pauses import FrozenHeap
from api.large_body_lane import Lane, LargeBodyLane
from api.limits import HANDLERS as LIMIT_HANDLERS
from api.limits import BodyLimits, Limits
from api.observe import observed
from api.routes_ops import Operations
from api.stream_watcher import StreamWatcher
from service.api_keys import KeyStore
from service.runtime import Runtime
from telemetry import exposition, logs, probes, tracing

# Seconds a starting server waits for its catch-up (Runtime.warm_projection) before it
# answers: a first read that ran beside it shared the interpreter with it, and was
# slower for it (issue 29).  A large store, or an erasure in another process holding
# the partitions' locks, must not hold start-up longer than this.
WARM_UP_HEAD_START = 2.0
WARM_UP_WAIT = 30.0  # seconds a stopping server waits for its start-up catch-up


async def openapi_json(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


ENDPOINTS = [
    *routes_commands.ENDPOINTS,
    *routes_queries.ENDPOINTS,
    *routes_erasure.ENDPOINTS,
    *routes_ops.ENDPOINTS,
    *sse.ENDPOINTS,
    openapi.Endpoint(
        "GET", "/openapi.json", openapi_json, "This document", response=responses.OpenAPIDocument
    ),
]


def create_app(
    runtime: Runtime | None = None,
    *,
    limits: Limits | None = None,
    browser: BrowserSafety | None = None,
    close_runtime: bool = False,
    lane: Lane | None = None,
    lane_secret: str | None = None,
    ops: Operations | None = None,
) -> Starlette:
    """Settings left out are read from the environment (README, *Configuration*)."""
    if runtime is None:
        from api.bootstrap import bootstrap  # it builds the app with this function

        return bootstrap()
    owned = close_runtime
    limits = limits or Limits.from_env()
    browser = browser or BrowserSafety.from_env()
    ops = ops or Operations.from_env(os.environ)
    if ops.json_logs:
        logs.configure_json()
    tracing.configure()  # only if OTEL_* asks for traces

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        probes.warm()
        runtime.warm_reads()
        # Done before /health answers, unless it takes longer than WARM_UP_HEAD_START:
        # then it goes on beside the first requests (Runtime.warm_projection).
        warming = threading.Thread(target=runtime.warm_projection, name="ctxstore-warm-up",
                                   daemon=True)  # fmt: skip
        app.state.warming = warming
        warming.start()
        await asyncio.to_thread(warming.join, WARM_UP_HEAD_START)
        keys.warm()  # the loopback check's statement, run before a request must
        if lane is not None:
            lane.start()
        try:
            yield
        finally:
            await asyncio.to_thread(warming.join, WARM_UP_WAIT)  # before the store closes
            if lane is not None:
                await lane.close()
            if owned:
                runtime.close()
            exposition.process_exited(os.getpid())
            tracing.shutdown()

    keys = KeyStore(runtime.store.engine)
    routes = [Route(ep.route, ep.handler, methods=[ep.method]) for ep in ENDPOINTS]
    routes += [*routes_ui.ROUTES, Route("/metrics", routes_ops.metrics, methods=["GET"])]
    laned = [] if lane is None else [Middleware(LargeBodyLane, lane=lane, routes=routes,
                                                body_timeout=limits.body_timeout)]  # fmt: skip
    app = Starlette(
        routes=routes,
        exception_handlers={**errors.HANDLERS, **LIMIT_HANDLERS},
        # Outermost first: measure and log the request (api.observe); refuse a foreign
        # Host, answer CORS preflights, hold non-JSON commands (browser_safety); then the
        # API key (auth: a tenant, a scope); then count the client's requests, per key,
        # and bound its body.
        middleware=[
            Middleware(FrozenHeap),  # after each request, outside all the rest (api.gc_pauses)
            observed(helper=lane_secret is not None, json_logs=ops.json_logs),
            *browser_middleware(browser, routes),
            Middleware(
                AuthMiddleware,
                keys=keys,
                forwarded_secret=lane_secret,
                metrics_access=ops.metrics_access,
                metrics_scope=ops.metrics_scope,
            ),  # fmt: skip
            Middleware(ClientConcurrency, slots=request_slots(limits.max_requests_per_client)),
            Middleware(BodyLimits, limits=limits),
            *laned,  # innermost: a large body goes to the helper process
        ],  # fmt: skip
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.lane = lane
    app.state.limits = limits
    app.state.ops = ops
    app.state.stream_slots = stream_slots(limits.max_streams_per_client)
    app.state.stream_watcher = StreamWatcher(runtime, limits.stream_poll)
    app.state.openapi = openapi.document(ENDPOINTS)
    return app
