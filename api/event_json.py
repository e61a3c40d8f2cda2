"""Events as JSON for the replay feed.

Uses ``scripts.event_json.event_to_json`` when that module exists (the
project's one serialiser); until then this minimal fallback keeps the feed
working with the same envelope: type, originator id and version, timestamp
and the event's own fields under ``data``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, cast
from uuid import UUID

ENVELOPE = ("originator_id", "originator_version", "timestamp", "originator_topic")


def _plain(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def _type_name(event: Any) -> str:
    """The catalogue name (``SessionStarted``, not the aggregate's ``Started``)."""
    for cls in type(event).__mro__:
        if cls.__module__ == "domain.events":
            return cls.__name__
    return type(event).__name__


def fallback_event_to_json(event: Any) -> dict[str, Any]:
    fields = vars(event)
    return {
        "type": _type_name(event),
        "originator_id": str(fields.get("originator_id")),
        "originator_version": fields.get("originator_version"),
        "timestamp": _plain(fields.get("timestamp")),
        "data": {k: _plain(v) for k, v in fields.items() if k not in ENVELOPE},
    }


def _load() -> Callable[[Any], dict[str, Any]]:
    try:
        from scripts.event_json import event_to_json as project_serialiser
    except ImportError:
        return fallback_event_to_json
    return cast(Callable[[Any], dict[str, Any]], project_serialiser)


event_to_json = _load()
