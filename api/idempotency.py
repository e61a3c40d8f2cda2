"""The ``Idempotency-Key`` header on every command route (``domain.idempotency``).

A retry with the key of a command that was stored answers what the first
one answered, byte for byte, and stores nothing; the same key with another
request (method, path or body) is a 422 ``idempotency_key_reused``.  Keys
are scoped by tenant (``request.scope["ctxstore_tenant"]``, "" when the
server has none).  A request that was refused stored nothing and is not
remembered: its retry runs again.  A key is remembered for
``CTXSTORE_IDEMPOTENCY_TTL`` (24 h by default), and not past the erasure of
its session (``domain.idempotency``).
"""

from __future__ import annotations

import functools
import hashlib
import logging

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.observe import mark_replayed
from api.openapi import Handler
from domain.idempotency import Pending, check_key
from service.runtime import Runtime

HEADER = "idempotency-key"
log = logging.getLogger("ctxstore.api")


def fingerprint(method: str, path: str, body: bytes) -> str:
    digest = hashlib.sha256(f"{method} {path}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def idempotent(handler: Handler) -> Handler:
    """``handler``, answering a retried key from what the store remembers."""

    @functools.wraps(handler)
    async def with_key(request: Request) -> Response:
        key = request.headers.get(HEADER)
        if key is None:
            return await handler(request)
        check_key(key)
        runtime: Runtime = request.app.state.runtime
        pending = Pending(
            str(request.scope.get("ctxstore_tenant") or ""),
            key,
            fingerprint(request.method, request.url.path, await request.body()),
            runtime.clock(),
            runtime.idempotency_ttl,
        )
        answer = await run_in_threadpool(runtime.answer_for, pending)
        if answer is not None:
            mark_replayed(request.scope)
            status, body = answer
            return Response(body, status, media_type="application/json")
        request.state.idempotency = pending
        response = await handler(request)
        if 200 <= response.status_code < 300:
            try:
                await run_in_threadpool(runtime.record_answer, pending, response.status_code,
                                        bytes(response.body).decode())  # fmt: skip
            except Exception:  # the command is stored; a retry rebuilds the answer from its claim
                log.warning("could not record the answer for an idempotency key", exc_info=True)
        return response

    return with_key
