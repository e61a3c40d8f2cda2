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
# Nesting of node content.  Python's JSON encoder and decoder recurse once a
# level (the export twice): a few hundred levels stored fine would later fail
# to export or serve.  Real tool arguments nest a handful of levels.
MAX_DEPTH = 100


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
    check_unicode(field, value)


def check_unicode(field: str, text: str) -> None:
    """No lone surrogates: JSON can spell ``"\\ud800"``, but no store can encode it."""
    if not text.isascii():  # the common case costs one scan in C
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise errors.InvalidCommand(f"{field} holds a lone surrogate, which is not "
                                        "Unicode text", field=field) from None  # fmt: skip


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
    node holding one would be stored and then fail every render.  Nesting is
    capped at ``MAX_DEPTH``.  Walked with a stack, so the check itself cannot
    exhaust the recursion limit.
    """
    stack = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, str):
            check_unicode(field, current)
            continue
        if current is None or isinstance(current, (bool, int)):
            continue
        if depth >= MAX_DEPTH and isinstance(current, (list, dict)):
            raise errors.InvalidCommand(f"{field} nests deeper than {MAX_DEPTH} levels",
                                        field=field)  # fmt: skip
        if isinstance(current, float):
            if not math.isfinite(current):
                raise errors.InvalidCommand(f"{field} holds {current}, which is not JSON",
                                            field=field)  # fmt: skip
        elif isinstance(current, list):
            stack.extend((child, depth + 1) for child in current)
        elif isinstance(current, dict):
            if not all(isinstance(key, str) for key in current):
                raise errors.InvalidCommand(f"{field} has a key that is not a string",
                                            field=field)  # fmt: skip
            stack.extend((key, depth) for key in current)
            stack.extend((child, depth + 1) for child in current.values())
        else:
            raise errors.InvalidCommand(f"{field} holds a {type(current).__name__}, "
                                        "which is not JSON", field=field)  # fmt: skip
