"""Shape limits on identifiers and labels, checked before any event exists.

A value that the projection tables cannot hold (an over-long id, a NUL
character PostgreSQL text refuses) would otherwise be stored as an event
and then fail every catch-up after it; refusing it up front keeps the log
projectable forever.
"""

from __future__ import annotations

import math
from typing import Any

from domain import errors

MAX_ID = 64
MAX_LABEL = 128
MAX_COUNT = 2**31 - 1  # token counts: the projection's integer columns


def check_id(field: str, value: str | None, limit: int = MAX_ID) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or len(value) > limit:
        raise errors.InvalidCommand(f"{field} must be a string of 1..{limit} characters",
                                    field=field)  # fmt: skip
    if any(ch in value for ch in "\x00\r\n\t"):
        raise errors.InvalidCommand(f"{field} must not contain control characters", field=field)


def check_node_id(value: str | None) -> None:
    """Node ids also appear as one URL path segment, so they cannot hold a ``/``."""
    check_id("node_id", value)
    if value is not None and "/" in value:
        raise errors.InvalidCommand("node_id must not contain '/'", field="node_id")


def check_model(model: str) -> None:
    """``provider:model``; the provider part is what usage rows record by default."""
    check_id("model", model, MAX_LABEL)
    provider, colon, _ = model.partition(":")
    if not colon or not provider:
        raise errors.InvalidCommand("model must be 'provider:model'", model=model)
    if len(provider) > MAX_ID:
        raise errors.InvalidCommand(f"the provider part of model must be at most {MAX_ID} "
                                    "characters", model=model)  # fmt: skip


def check_count(field: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        raise errors.InvalidCommand(f"{field} must be an integer of 0..{MAX_COUNT:,}",
                                    field=field)  # fmt: skip


def check_label(field: str, value: str | None, limit: int = 10_000) -> None:
    if value is None:
        return
    if not isinstance(value, str) or len(value) > limit or "\x00" in value:
        raise errors.InvalidCommand(f"{field} must be text of at most {limit} characters "
                                    "without NUL", field=field)  # fmt: skip


def check_window(value: int | None) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not 256 <= value <= 100_000_000:
        raise errors.InvalidCommand("context_window must be an integer of 256..100,000,000",
                                    field="context_window")  # fmt: skip


def check_json(field: str, value: Any) -> None:
    """Plain JSON only: no NaN or Infinity, no keys but strings, no other types.

    Python's ``json`` reads ``NaN`` and writes it back, but it is not JSON:
    the projection's canonical encoding and every provider refuse it, so a
    node holding one would be stored and then fail every render.  Walked
    with a stack, so deep nesting cannot exhaust the recursion limit.
    """
    stack = [value]
    while stack:
        current = stack.pop()
        if current is None or isinstance(current, (str, bool, int)):
            continue
        if isinstance(current, float):
            if not math.isfinite(current):
                raise errors.InvalidCommand(f"{field} holds {current}, which is not JSON",
                                            field=field)  # fmt: skip
        elif isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, dict):
            if not all(isinstance(key, str) for key in current):
                raise errors.InvalidCommand(f"{field} has a key that is not a string",
                                            field=field)  # fmt: skip
            stack.extend(current.values())
        else:
            raise errors.InvalidCommand(f"{field} holds a {type(current).__name__}, "
                                        "which is not JSON", field=field)  # fmt: skip
