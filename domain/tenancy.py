"""Tenants: every session belongs to one, and is invisible to every other.

A tenant is a name an API key carries (``service.api_keys``).  A session
records its tenant when it starts (``SessionStarted`` v2); a branch inherits
its source's.  Sessions stored before tenants existed belong to
``DEFAULT_TENANT``, which is also the tenant of a server nobody configured
(no key created, reached over loopback; see ``api.auth``).

Another tenant's session is *not found*, never *forbidden*: a 403 would
tell the caller the id exists.  The refusal is the very ``SessionNotFound``
an unknown id gets, message and all, so the two cannot be told apart.
"""

from __future__ import annotations

import re

from domain import errors

DEFAULT_TENANT = "default"
# Plain, URL- and log-safe names; no '/', so "tenant/node id" can never be ambiguous.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_tenant(name: str) -> str:
    """``name`` if it is a valid tenant name, else ``InvalidCommand``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise errors.InvalidCommand(
            "a tenant is 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit",
            tenant=name,
        )
    return name


def check_owner(owner: str, tenant: str | None, session_id: str) -> None:
    """Refuse a session of tenant ``owner`` to a caller of ``tenant`` as unknown.

    ``tenant`` None is a caller inside the process (the CLI, a worker, the
    runtime's own follow-up work), which may see every session.
    """
    if tenant is not None and tenant != owner:
        raise errors.SessionNotFound(f"unknown session {session_id}", session_id=session_id)
