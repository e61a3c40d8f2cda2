"""A request as data: built once per route (``commands``, ``queries``), sent by both clients.

``Client`` and ``AsyncClient`` turn each route function into a method with
the same signature (``ctxstore_client.sync``, ``ctxstore_client.aio``), so the two
can never disagree on a path, a field or a response model.  Arguments left
``None`` are left out of the body: the server's defaults apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

T = TypeVar("T", bound=BaseModel)
When = datetime | str | None  # an aware datetime, or ISO 8601 text with its offset


class Keep(Enum):
    """An argument's default where ``None`` means something (clear a setting): left out of
    the body, so the server keeps what it has."""

    KEEP = "keep"


KEEP = Keep.KEEP


def _at(when: When) -> datetime | None:
    """``when`` as the datetime a command holds: text is read here (a ``ValueError``
    before anything is sent if it is no ISO 8601); the server refuses one without
    its offset, as it refuses naive datetimes."""
    return datetime.fromisoformat(when) if isinstance(when, str) else when


@dataclass(frozen=True)
class Request(Generic[T]):
    method: str
    path: str
    model: type[T]
    json: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None


def _seg(value: str) -> str:
    """One path segment: node ids may hold spaces, ``?`` or ``#``."""
    return quote(str(value), safe="")


def _s(session_id: str, *rest: str) -> str:
    return "/".join(["/sessions", _seg(session_id), *rest])


def _body(**fields: Any) -> dict[str, Any]:
    out = {k: v for k, v in fields.items() if v is not None}
    if isinstance(out.get("at"), datetime):
        out["at"] = out["at"].isoformat()
    return out


def _post(path: str, answer: type[T], key: str | None, /, **fields: Any) -> Request[T]:
    return Request("POST", path, answer, _body(**fields), idempotency_key=key)


def _get(path: str, answer: type[T], /, **params: Any) -> Request[T]:
    return Request("GET", path, answer, params={k: v for k, v in params.items() if v is not None})
