"""One domain event as plain JSON: the export file and the HTTP replay feed.

Both the ``ctxstore export`` lines and ``GET /sessions/{id}/events`` use
this serialiser (the API imports it), so a client paging the
feed and an operator reading an export see the same field names and values.
The result is deterministic — no wall clock, no ordering that depends on the
Python process — which is what makes export → re-export byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

# Fields every eventsourcing event carries; they form the envelope, not ``data``.
ENVELOPE = frozenset({"originator_id", "originator_version", "timestamp", "originator_topic"})
# What an export line keeps of the envelope (the session id is the file's, not the line's).
EXPORT_KEYS = ("seq", "type", "timestamp", "data")


def plain(value: Any) -> Any:
    """JSON-ready copy of an event field (UUIDs and datetimes as strings)."""
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=repr)
    return value


def type_name(event: Any) -> str:
    """The catalogue name of an event.

    The aggregate exposes its created event as ``Session.Started`` (a subclass
    eventsourcing builds), but the catalogue and the README call it
    ``SessionStarted``: the first class defined in ``domain.events`` wins.
    """
    for cls in type(event).__mro__:
        if cls.__module__ == "domain.events":
            return cls.__name__
    return type(event).__name__


def event_to_json(event: Any) -> dict[str, Any]:
    """The event's envelope and its own fields under ``data``.

    ``seq`` is the event's position in its session (the originator version);
    ``originator_id`` and ``originator_version`` are kept as well because the
    replay feed pages on them.
    """
    fields = vars(event)
    version = fields.get("originator_version")
    return {
        "type": type_name(event),
        "seq": version,
        "originator_id": plain(fields.get("originator_id")),
        "originator_version": version,
        "timestamp": plain(fields.get("timestamp")),
        "data": {k: plain(v) for k, v in sorted(fields.items()) if k not in ENVELOPE},
    }


def export_line(event: Any) -> str:
    """One JSONL export line: sorted keys and fixed separators, ASCII only."""
    record = event_to_json(event)
    return json.dumps({k: record[k] for k in EXPORT_KEYS}, sort_keys=True,
                      separators=(",", ":"))  # fmt: skip
