"""The Starlette application.

``create_app(runtime)`` serves an existing runtime (the caller closes it);
``create_app()`` opens one on ``CTXSTORE_DATABASE_URL`` and closes it at
shutdown, which is what ``uvicorn api.app:create_app --factory`` uses.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from api import (
    errors,
    openapi,
    responses,
    routes_commands,
    routes_erasure,
    routes_queries,
    routes_ui,
    sse,
)
from service.runtime import Runtime


async def openapi_json(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


ENDPOINTS = [
    *routes_commands.ENDPOINTS,
    *routes_queries.ENDPOINTS,
    *routes_erasure.ENDPOINTS,
    *sse.ENDPOINTS,
    openapi.Endpoint(
        "GET", "/openapi.json", openapi_json, "This document", response=responses.OpenAPIDocument
    ),
]


def create_app(runtime: Runtime | None = None) -> Starlette:
    owned = runtime is None
    if runtime is None:
        runtime = Runtime(os.environ.get("CTXSTORE_DATABASE_URL"))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if owned:
                runtime.close()

    app = Starlette(
        routes=[Route(ep.path, ep.handler, methods=[ep.method]) for ep in ENDPOINTS]
        + routes_ui.ROUTES,
        exception_handlers=errors.HANDLERS,
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.openapi = openapi.document(ENDPOINTS)
    return app
