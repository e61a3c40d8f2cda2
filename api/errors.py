"""Every failure leaves the API as ``{"error": {"code", "message", "details"}}``.

| cause                                  | status | code                     |
| -------------------------------------- | ------ | ------------------------ |
| ``DomainError`` (refusal)              | ``STATUS`` | its ``code``         |
| body is not JSON                       | 400    | ``malformed_json``       |
| body repeats a key in one object       | 400    | ``duplicate_key``        |
| body/query fails its schema            | 422    | ``invalid_request``      |
| unknown route                          | 404    | ``not_found``            |
| known route, wrong method              | 405    | ``method_not_allowed``   |
| summarizer unreachable / bad answer    | 502    | ``summarizer_failed``    |
| database locked, busy or unreachable   | 503    | ``database_unavailable`` |
| other writers kept winning (no version)| 503    | ``write_contention``     |
| store re-split into other partitions   | 503    | ``restart_required``     |
| anything else                          | 500    | ``internal`` (no trace)  |

No answer ever quotes a credential or an upstream server's body: the
summarizer's errors are phrased without them (``domain.summarizer``), and
the details go to the server log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match

from domain import errors as domain_errors
from domain.erasure import TenantNotConfirmed
from domain.errors import DomainError, WriteContention
from domain.summarizer import SummarizerError
from projections.store import DATABASE_ERRORS, database_error_line
from projections.tracking import PartitionCountChanged

log = logging.getLogger("ctxstore.api")

HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
}


# A refusal's HTTP status, by class: the nearest class in the refusal's MRO
# wins (``SessionNotFound`` is a ``NotFound``), and a refusal named nowhere
# here is a 422. The domain keeps only the machine code.
STATUS: dict[type[DomainError], int] = {
    domain_errors.NotFound: 404,
    domain_errors.DuplicateNode: 409,
    domain_errors.AgentRunning: 409,
    domain_errors.AgentNotRunning: 409,
    domain_errors.StaleVersion: 409,
    domain_errors.NothingToCompact: 409,
    domain_errors.InvalidIdempotencyKey: 400,
    TenantNotConfirmed: 400,
}


def status_for(refusal: type[DomainError]) -> int:
    """The HTTP status of a refusal class (422 unless ``STATUS`` says otherwise)."""
    for cls in refusal.__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 422


class MalformedJSON(Exception):
    """The request body is not a JSON document."""

    code = "malformed_json"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DuplicateKey(MalformedJSON):
    """An object in the body names a key twice: which value was meant is unknowable."""

    code = "duplicate_key"


def error_response(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details or {}}}
    return JSONResponse(body, status_code=status, headers=headers)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


async def domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DomainError)
    return error_response(status_for(type(exc)), exc.code, exc.message, _jsonable(exc.details))


async def malformed_json(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, MalformedJSON)
    return error_response(400, exc.code, exc.message)


async def validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ValidationError)
    errors = json.loads(exc.json(include_url=False))
    first = errors[0] if errors else {}
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    message = f"{where}: {first.get('msg', 'invalid')}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return error_response(422, "invalid_request", message, {"errors": errors})


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    message = exc.detail if isinstance(exc.detail, str) else code
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
        return error_response(405, code, message, headers={**(exc.headers or {}),
                                                           "Allow": allowed(request)})  # fmt: skip
    return error_response(exc.status_code, code, message, headers=exc.headers)


_METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed(request: Request) -> str:
    """Every method some route serves on the request's path (Starlette's 405 names only
    the first route's, and each route here serves one method)."""
    found: set[str] = set()
    for route in request.app.routes:
        if route.matches(request.scope)[0] is not Match.NONE:
            found |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(found, key=lambda m: (_METHOD_ORDER + (m,)).index(m)))


async def summarizer_error(request: Request, exc: Exception) -> Response:
    # The message names no URL and no upstream body (``SummarizerError``); the
    # cause, logged here, may.
    log.warning("summarizer failed: %s (cause: %r)", exc, exc.__cause__)
    return error_response(502, "summarizer_failed", str(exc))


async def write_contention(request: Request, exc: Exception) -> Response:
    log.warning("write contention: %s", exc)
    return error_response(503, "write_contention", str(exc), headers={"Retry-After": "1"})


async def database_unavailable(request: Request, exc: Exception) -> Response:
    """A lock held too long or a lost connection: retryable, and nothing half-written.

    Every write is one transaction, so the request either stored all of its
    events or none; a command whose events committed already answered
    success even if the projection could not follow (``Runtime.execute``).
    """
    log.warning("database unavailable: %s", database_error_line(exc))
    return error_response(503, "database_unavailable", "the database is busy or unreachable; "
                          "retry shortly", headers={"Retry-After": "1"})  # fmt: skip


async def restart_required(request: Request, exc: Exception) -> Response:
    """A rebuild split the store anew while this process ran: only a restart helps,
    which whoever supervises it must do (no Retry-After: retrying here won't)."""
    log.error("%s", exc)
    return error_response(503, "restart_required", str(exc))


async def client_disconnected(request: Request, exc: Exception) -> Response:
    """The client hung up before its body was in: nothing was parsed or stored, and
    nobody is left to answer (the response goes nowhere).  Not a server error, so no
    traceback in the log."""
    log.info("%s %s: the client went away before its body was in", request.method,
             request.url.path)  # fmt: skip
    return error_response(400, "client_disconnected", "the request body did not arrive whole")


async def internal_error(request: Request, exc: Exception) -> Response:
    # Starlette re-raises after this response is sent, so the server logs the
    # traceback; the client only ever sees the code.
    return error_response(500, "internal", "internal server error")


HANDLERS: dict[Any, Any] = {
    DomainError: domain_error,
    MalformedJSON: malformed_json,
    ValidationError: validation_error,
    HTTPException: http_error,
    SummarizerError: summarizer_error,
    WriteContention: write_contention,
    PartitionCountChanged: restart_required,
    ClientDisconnect: client_disconnected,
    **dict.fromkeys(DATABASE_ERRORS, database_unavailable),
    Exception: internal_error,
}
