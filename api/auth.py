"""Who is calling: the ``Authorization: Bearer`` key, its tenant and its scope.

An ASGI middleware in front of every route.  It resolves the key
(``service.api_keys``) and records, in the ASGI scope, what the rest of the
stack goes by: ``ctxstore_tenant`` (handlers pass it to the runtime, whose
domain check makes other tenants' sessions unknown), ``ctxstore_key_id``
(what idempotency and per-client limits are keyed by) and
``ctxstore_scope``.

- No key, or one that is unknown or revoked: ``401 unauthenticated`` with
  ``WWW-Authenticate: Bearer``.
- A key whose scope is too narrow for the method: ``403 forbidden``.  GET
  and HEAD need ``read``, DELETE (erasure) ``admin``, every other method
  (the commands) ``write``.
- ``/health``, ``/ready``, ``/openapi.json`` and the inspector's static files
  are public: they hold no session data (the inspector reads through the API,
  with a key).  ``/metrics`` is open to loopback clients and wants a key of
  ``CTXSTORE_METRICS_SCOPE`` from others, as ``CTXSTORE_METRICS_ACCESS`` says.

Zero set-up: until the first key is created in the store (revoked ones
count, so revoking every key never opens a server), a request from a
loopback address is served as the default tenant with ``admin`` scope and
key id None, whatever Authorization it carries (there is no key to check it
against).  A request from any other address still needs a key, so ``serve
--host 0.0.0.0`` on a fresh store is never open to the network, and neither
is one behind a local reverse proxy that says whom it forwards for
(``X-Forwarded-For``, which uvicorn trusts from loopback only).  Starlette's
in-process test client (no socket at all) counts as loopback.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import error_response
from api.openapi import PUBLIC_PATHS
from domain.tenancy import DEFAULT_TENANT
from service.api_keys import ApiKey, KeyStore

TENANT, KEY_ID, SCOPE = "ctxstore_tenant", "ctxstore_key_id", "ctxstore_scope"
IN_PROCESS = "testclient"  # starlette.testclient's client name: no network involved
CHALLENGE = 'Bearer realm="ctxstore"'
METRICS_PATH = "/metrics"  # api.routes_ops: its own rule (open on loopback, else a key)
FORWARDED_PRINCIPAL = b"ctxstore-principal"  # api.large_body_lane sets it, never a client


def needed_scope(method: str) -> str:
    if method in ("GET", "HEAD", "OPTIONS"):
        return "read"
    return "admin" if method == "DELETE" else "write"


def tenant_of(request: Request) -> str:
    """The caller's tenant, as the middleware resolved it (never absent behind it)."""
    tenant: str = request.scope[TENANT]
    return tenant


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path == "/ui" or path.startswith("/ui/")


def _loopback(scope: Scope) -> bool:
    """Whether the request comes from this machine (the peer's address)."""
    client = scope.get("client")
    if not client:
        return False
    host = str(client[0])
    if host == IN_PROCESS:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _bearer(scope: Scope) -> str | None:
    """The bearer token, "" for an Authorization header of another kind, None without one."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").strip().partition(" ")
            return token.strip() if kind.lower() == "bearer" else ""
    return None


def _forwarded(scope: Scope, secret: str) -> tuple[str, str | None, str] | None:
    """The (tenant, key id, scope) the API process put in ``ctxstore-principal``, if
    the header proves it came from there (the helper's secret); else None."""
    for name, value in scope.get("headers", ()):
        if name == FORWARDED_PRINCIPAL:
            try:
                proof, tenant, key_id, key_scope = json.loads(value)
            except (ValueError, TypeError, RecursionError):
                return None
            if not all(isinstance(v, str) for v in (proof, tenant, key_scope)):
                return None
            if key_id is not None and not isinstance(key_id, str):
                return None
            # any text as bytes, a lone surrogate (JSON's "\ud800") included
            if hmac.compare_digest(proof.encode("utf-8", "surrogatepass"), secret.encode()):
                return tenant, key_id, key_scope
    return None


class AuthMiddleware:
    def __init__(self, app: ASGIApp, keys: KeyStore, forwarded_secret: str | None = None,
                 metrics_access: str = "loopback", metrics_scope: str = "admin"
                 ) -> None:  # fmt: skip
        """``forwarded_secret``: this app is the large-body helper (``api.helper_server``),
        and takes the principal its API process resolved, proved by this secret, from
        a peer on its Unix socket only.  ``metrics_access`` and ``metrics_scope``: who
        may scrape ``/metrics`` (``api.routes_ops``)."""
        self.app = app
        self.keys = keys
        self.forwarded_secret = forwarded_secret
        self.metrics_access, self.metrics_scope = metrics_access, metrics_scope

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _public(scope["path"]):
            await self.app(scope, receive, send)
            return
        metrics = scope["path"] == METRICS_PATH
        if metrics and (self.metrics_access == "open"
                        or (self.metrics_access == "loopback" and _loopback(scope))):  # fmt: skip
            await self.app(scope, receive, send)
            return
        if self.forwarded_secret and scope.get("client") is None:  # a Unix socket's peer
            forwarded = _forwarded(scope, self.forwarded_secret)
            if forwarded is not None:
                scope[TENANT], scope[KEY_ID], scope[SCOPE] = forwarded
                await self.app(scope, receive, send)
                return
        token = _bearer(scope)
        key: ApiKey | None = None
        if _loopback(scope) and not await run_in_threadpool(self.keys.any_created):
            key = ApiKey("", DEFAULT_TENANT, "admin", 0.0)  # zero set-up: see above
        elif token is None:
            await _refuse(scope, receive, send, "an API key is required: send "
                          "Authorization: Bearer <key> (ctxstore keys create)")  # fmt: skip
            return
        elif token:
            key = await run_in_threadpool(self.keys.resolve, token)
        if key is None:
            await _refuse(scope, receive, send, "the API key is unknown or revoked",
                          'Bearer realm="ctxstore", error="invalid_token"')  # fmt: skip
            return
        needed = self.metrics_scope if metrics else needed_scope(scope["method"])
        if not key.allows(needed):
            response = error_response(
                403, "forbidden", f"this key's scope is {key.scope}; "
                f"{scope['method']} needs {needed}", {"scope": key.scope, "needed": needed},
            )  # fmt: skip
            await response(scope, receive, send)
            return
        scope[TENANT] = key.tenant
        scope[KEY_ID] = key.key_id or None
        scope[SCOPE] = key.scope
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, receive: Receive, send: Send, message: str,
                  challenge: str = CHALLENGE) -> Any:  # fmt: skip
    response = error_response(401, "unauthenticated", message,
                              headers={"WWW-Authenticate": challenge})  # fmt: skip
    await response(scope, receive, send)
