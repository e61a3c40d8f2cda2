"""The API's error envelope as exceptions: one class per kind of answer a caller handles."""

from __future__ import annotations

from typing import Any


class CtxStoreError(Exception):
    """Any non-2xx answer: ``status``, the machine-readable ``code``, ``message``, ``details``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any],
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.details = details
        self.retry_after = retry_after


class InvalidRequest(CtxStoreError):
    """400 or 422: the body, the query or the command itself was refused; nothing stored."""


class NotFound(CtxStoreError):
    """404: no such session, node, commit or route."""


class Conflict(CtxStoreError):
    """409: ``stale_version``, ``agent_running``, ``duplicate_node``, ...; nothing stored."""


class Unavailable(CtxStoreError):
    """503: the database was busy or unreachable; retry after ``retry_after`` seconds."""


class ServerError(CtxStoreError):
    """Any other 5xx (a bug on the server: please report it)."""


def error_for(status: int, body: Any, retry_after: str | None) -> CtxStoreError:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {"code": f"http_{status}", "message": str(body)[:200], "details": {}}
    kind: type[CtxStoreError] = (
        NotFound
        if status == 404
        else Conflict
        if status == 409
        else Unavailable
        if status == 503
        else InvalidRequest
        if 400 <= status < 500
        else ServerError
    )
    try:
        wait = float(retry_after) if retry_after else None
    except ValueError:
        wait = None
    return kind(
        status,
        str(error.get("code")),
        str(error.get("message")),
        dict(error.get("details") or {}),
        wait,
    )
