"""Erasure routes: ``DELETE /sessions/{sid}``, ``DELETE /tenant`` and the audit trail.

``DELETE /tenant`` erases the caller's own tenant (an admin key's): there
is no key above a tenant, and another tenant's name would only say whether
it exists.  ``confirm`` must repeat the tenant's name.

Who erased is the API key the request came with (``ctxstore_key_id`` in the
ASGI scope, set by the authentication layer), else ``local``.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from api import erasure_responses as r
from api import query_params as qp
from api.auth import tenant_of
from api.openapi import Endpoint
from service.erasure import Eraser, erasures
from service.runtime import Runtime


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def erase_session(request: Request) -> Response:
    qp.parse_query(request, qp.EmptyQuery)
    eraser = Eraser(_runtime(request))
    erased = await run_in_threadpool(eraser.erase, request.path_params["sid"], _by(request), None,
                                     tenant_of(request))  # fmt: skip
    return JSONResponse(erased)


def _by(request: Request) -> str:
    return str(request.scope.get("ctxstore_key_id") or "local")


async def erase_tenant(request: Request) -> Response:
    q = qp.parse_query(request, qp.EraseTenantQuery)
    eraser = Eraser(_runtime(request))
    erased = await run_in_threadpool(eraser.erase_tenant, tenant_of(request), _by(request),
                                     None, q.confirm)  # fmt: skip
    return JSONResponse(erased)


async def list_erasures(request: Request) -> Response:
    qp.parse_query(request, qp.EmptyQuery)
    found = await run_in_threadpool(erasures, _runtime(request), tenant_of(request))
    return JSONResponse({"erasures": found})


ENDPOINTS = [
    Endpoint("DELETE", "/sessions/{sid}", erase_session,
             "Erase a session and its branches for good (content, projections, quoting "
             "summaries elsewhere); answers what was erased, 404 once it is gone",
             response=r.Erased),
    Endpoint("DELETE", "/tenant", erase_tenant,
             "Erase every session of the caller's tenant (confirm=<tenant>), as DELETE "
             "/sessions/{sid} would each; its API keys stay", query=qp.EraseTenantQuery,
             response=r.TenantErased),
    Endpoint("GET", "/erasures", list_erasures, "The erasure audit trail, oldest first",
             response=r.ErasureList),
]  # fmt: skip
