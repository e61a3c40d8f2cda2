"""API keys: who may call the HTTP API, for which tenant, with which scope.

The ``ctx_api_keys`` table is NOT a projection of events.  A key is created
and revoked by the ``ctxstore keys`` command line, never by a domain event,
so nothing could rebuild it from the log: it is created by revision 0009
and kept out of ``projections.tables.PROJECTION_TABLES``, which is what
``rebuild`` empties and digests.

Only a SHA-256 digest of each secret is stored.  The secret is 32 random
bytes (``secrets.token_urlsafe``), so a digest without salt or stretching
is enough: there is no dictionary to try, and a stolen table gives no
usable key.  The secret is shown once, when the key is created.

Scopes are ordered: ``read`` (queries), ``write`` (queries and commands),
``admin`` (everything, erasure included).  A revoked key stays in the table
(its id is in audit trails) and never authenticates again.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Engine, Float, MetaData, String, Table, func, select, update

from domain import errors
from domain.tenancy import check_tenant

log = logging.getLogger("ctxstore.keys")
SCOPES = ("read", "write", "admin")  # each includes the ones before it
PREFIX = "ctx_"  # so a leaked secret is recognisable (and redactable) as ours

api_keys = Table(
    "ctx_api_keys",
    MetaData(),  # not the projections' metadata: rebuild must never touch it
    Column("key_id", String(32), primary_key=True),
    Column("tenant", String(64), nullable=False),
    Column("scope", String(8), nullable=False),
    Column("secret_hash", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
)


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    tenant: str
    scope: str
    created_at: float
    revoked_at: float | None = None

    def allows(self, needed: str) -> bool:
        return SCOPES.index(self.scope) >= SCOPES.index(needed)

    def to_json(self) -> dict[str, Any]:
        def when(t: float | None) -> str | None:
            return None if t is None else datetime.fromtimestamp(t, UTC).isoformat()

        return {
            "key_id": self.key_id, "tenant": self.tenant, "scope": self.scope,
            "created_at": when(self.created_at), "revoked_at": when(self.revoked_at),
        }  # fmt: skip


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _key(row: Any) -> ApiKey:
    return ApiKey(row.key_id, row.tenant, row.scope, row.created_at, row.revoked_at)


NO_KEY_RECHECK = 1.0  # seconds


class KeyStore:
    """The key table of one database (the engine the projections use)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._any = False  # once a key exists it always will: rows are never deleted
        self._none_until = 0.0  # until when "no key yet" is believed without asking

    def create(self, tenant: str, scope: str) -> tuple[ApiKey, str]:
        """A new key and its secret (the only time the secret is known)."""
        check_tenant(tenant)
        if scope not in SCOPES:
            raise errors.InvalidCommand(f"scope must be one of {list(SCOPES)}", scope=scope)
        secret = PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(secrets.token_hex(8), tenant, scope, time.time())
        with self.engine.begin() as conn:
            conn.execute(api_keys.insert().values(
                key_id=key.key_id, tenant=key.tenant, scope=key.scope,
                secret_hash=secret_hash(secret), created_at=key.created_at,
            ))  # fmt: skip
        self._any = True
        return key, secret

    def list(self) -> list[ApiKey]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(api_keys).order_by(api_keys.c.created_at,
                                                          api_keys.c.key_id))  # fmt: skip
            return [_key(row) for row in rows]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke ``key_id`` (again is a no-op); ``NotFound`` if no such key."""
        with self.engine.begin() as conn:
            conn.execute(update(api_keys)
                         .where(api_keys.c.key_id == key_id, api_keys.c.revoked_at.is_(None))
                         .values(revoked_at=time.time()))  # fmt: skip
            row = conn.execute(select(api_keys).where(api_keys.c.key_id == key_id)).first()
        if row is None:
            raise errors.NotFound(f"no key {key_id!r}", key_id=key_id)
        return _key(row)

    def resolve(self, secret: str) -> ApiKey | None:
        """The live key with this secret, or None (unknown or revoked)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(api_keys).where(
                api_keys.c.secret_hash == secret_hash(secret),
                api_keys.c.revoked_at.is_(None),
            )).first()  # fmt: skip
        return None if row is None else _key(row)

    def any_created(self) -> bool:
        """Whether any key was ever created here (revoked ones count: see ``api.auth``).

        A "no" is asked again at most every ``NO_KEY_RECHECK`` seconds: asking
        on every loopback request was a query each (a tenth of an append's
        CPU).  So after the first ``ctxstore keys create`` in another process,
        loopback clients of each server process keep the open zero-set-up
        access for up to that long, as they had it the moment before."""
        if self._any:
            return True
        now = time.monotonic()
        if now < self._none_until:
            return False
        self._any = self._count() > 0
        self._none_until = now + NO_KEY_RECHECK
        return self._any

    def warm(self) -> None:
        """Ask once as a server starts, keeping no answer: the statement compiled before
        the first request (issue 29), and a key created before that request still
        counts for it, as if this had not run.  Only a head start, as
        ``Runtime.warm_reads``: a failure is logged, and the first request asks again."""
        try:
            if self._count() > 0:
                self._any = True  # "yes" never goes back (revoked keys count)
        except Exception:
            log.warning("asking whether any API key exists failed", exc_info=True)

    def _count(self) -> int:
        with self.engine.connect() as conn:
            count: int = conn.execute(select(func.count()).select_from(api_keys)).scalar_one()
        return count
