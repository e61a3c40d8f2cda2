"""Idempotency keys: a retried command returns its first answer and stores nothing new.

A client that lost an answer (a timeout, a dropped connection, a 503 whose
commit did land) sends the command again with the same key.  The key is
claimed by a one-event ``IdempotencyClaim`` aggregate whose id derives from
(tenant, key), saved in the same atomic write as the command's events, as
``domain.node_claim`` claims node ids: either the command and its claim are
both stored, or neither is, and a second claim of the key is a primary-key
conflict in the event store, so two concurrent retries store one command.

The claim records a fingerprint of the request (the same key with another
body is refused) and the command's result; a second event, ``Answered``,
records the exact answer sent once it is known, so a retry gets the same
status and body.  Claims carry no content and projections skip them.

The command methods do not take the key as an argument: the caller sets
``PENDING`` around one command and ``CtxStore._save`` adds the claim to that
command's write.

A key lives ``ttl`` (``CTXSTORE_IDEMPOTENCY_TTL``, 24 h by default): the
claim's id also derives from the time window of that length the command
came in, so a key used again after it expired is claimed afresh under
another id, and nothing has to be deleted first.  A lookup reads the claims
of this window and the one before (a key used late in one window is still
live early in the next) and honours one only while it is younger than
``ttl``.  Erasing a session deletes its claims, and expired ones
(``service/erasure.py``): an erased command's key answers as a new key.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from domain import errors

_NAMESPACE = uuid5(NAMESPACE_URL, "ctxstore:idempotency-key")
MAX_KEY = 255
DEFAULT_TTL = timedelta(hours=24)
TTL_VARIABLE = "CTXSTORE_IDEMPOTENCY_TTL"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class IdempotencyClaim(Aggregate):
    """Key ``key`` of ``tenant`` was used by one stored command."""

    class Created(Aggregate.Created):
        tenant: str
        key: str
        fingerprint: str
        session_id: str
        result: Any  # [value, version], as the command returned them

    class Answered(Aggregate.Event):
        status: int
        body: str

    def __init__(self, tenant: str, key: str, fingerprint: str, session_id: str,
                 result: Any) -> None:  # fmt: skip
        self.tenant, self.key, self.fingerprint = tenant, key, fingerprint
        self.session_id, self.result = session_id, result
        self.answer: tuple[int, str] | None = None


_TOPIC = f"{IdempotencyClaim.__module__}:{IdempotencyClaim.__qualname__}"
CREATED_TOPIC = f"{_TOPIC}.Created"
ANSWERED_TOPIC = f"{_TOPIC}.Answered"


def ttl_from(text: str | None) -> timedelta:
    """``CTXSTORE_IDEMPOTENCY_TTL``: seconds, or a number with ``s``, ``m``, ``h`` or ``d``."""
    text = (text or "").strip().lower()
    if not text:
        return DEFAULT_TTL
    unit = _UNITS.get(text[-1])
    number = text[:-1] if unit else text
    try:
        seconds = int(number) * (unit or 1)
    except ValueError:
        seconds = 0
    if seconds <= 0:
        raise ValueError(f"{TTL_VARIABLE} must be a whole number of seconds > 0, or one "
                         f"with s, m, h or d (24h), not {text!r}")  # fmt: skip
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class Pending:
    """The key a command being run was sent with, the request it came in, and when."""

    tenant: str
    key: str
    fingerprint: str
    at: datetime
    ttl: timedelta = DEFAULT_TTL

    @property
    def window(self) -> int:
        return int(self.at.timestamp() // self.ttl.total_seconds())

    @property
    def claim_id(self) -> UUID:
        """Where a command run now claims the key."""
        return claim_id(self.tenant, self.key, self.window)

    def lookups(self) -> list[UUID]:
        """Where a live claim of the key may be: this window, the one before, and the
        window-less id of older versions."""
        return [claim_id(self.tenant, self.key, self.window),
                claim_id(self.tenant, self.key, self.window - 1),
                claim_id(self.tenant, self.key)]  # fmt: skip

    def live(self, created: datetime) -> bool:
        return self.at - created < self.ttl


@dataclass(frozen=True)
class Stored:
    """What a key's claim says: the command's result and, once recorded, its answer."""

    claim: UUID
    fingerprint: str
    result: tuple[Any, int]
    answer: tuple[int, str] | None


class IdempotentReplay(Exception):  # noqa: N818 - a signal, not a failure
    """The key was claimed by a command stored meanwhile (a concurrent retry won)."""

    def __init__(self, stored: Stored) -> None:
        super().__init__("idempotency key already used")
        self.stored = stored


PENDING: ContextVar[Pending | None] = ContextVar("ctxstore_idempotency", default=None)


def check_key(key: str) -> None:
    if not key or len(key) > MAX_KEY or not all(" " <= ch <= "~" for ch in key):
        raise errors.InvalidIdempotencyKey(
            f"Idempotency-Key must be 1..{MAX_KEY} printable ASCII characters"
        )


def claim_id(tenant: str, key: str, window: int | None = None) -> UUID:
    """The claim of ``key`` in ``window`` (None: as versions before expiry named it)."""
    suffix = "" if window is None else f"\n{window}"
    return uuid5(_NAMESPACE, f"{tenant}\n{key}{suffix}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def claim_event(pending: Pending, session_id: str, result: tuple[Any, int],
                at: datetime) -> IdempotencyClaim.Created:  # fmt: skip
    """The claim's first event, saved with the command's own events."""
    return IdempotencyClaim.Created(  # type: ignore[call-arg]
        originator_id=pending.claim_id, originator_version=1, timestamp=at,
        originator_topic=_TOPIC, tenant=pending.tenant, key=pending.key,
        fingerprint=pending.fingerprint, session_id=session_id,
        result=[_jsonable(result[0]), result[1]],
    )  # fmt: skip


def answered_event(claim: UUID, status: int, body: str,
                   at: datetime) -> IdempotencyClaim.Answered:  # fmt: skip
    return IdempotencyClaim.Answered(  # type: ignore[call-arg]
        originator_id=claim, originator_version=2, timestamp=at,
        status=status, body=body,
    )  # fmt: skip


def stored_from(events: list[Any], pending: Pending) -> Stored | None:
    """The claim as its stored (domain) events tell it; None when there are none, or
    when it expired."""
    created = next((e for e in events if isinstance(e, IdempotencyClaim.Created)), None)
    if created is None or not pending.live(created.timestamp):
        return None
    answered = next((e for e in events if isinstance(e, IdempotencyClaim.Answered)
                     and e.timestamp >= created.timestamp), None)  # fmt: skip
    # (an older answer is one recorded as an erasure deleted its claim: not this one's)
    value, version = created.result
    return Stored(created.originator_id, created.fingerprint, (value, int(version)),
                  (answered.status, answered.body) if answered else None)  # fmt: skip


def check_same_request(pending: Pending, stored: Stored) -> None:
    if stored.fingerprint != pending.fingerprint:
        raise errors.IdempotencyKeyReused(
            "this Idempotency-Key was used for another request; use a new key",
            key=pending.key,
        )
