"""Shape limits on identifiers and labels, checked before any event exists.

A value that the projection tables cannot hold (an over-long id, a NUL
character PostgreSQL text refuses) would otherwise be stored as an event
and then fail every catch-up after it; refusing it up front keeps the log
projectable forever.
"""

from __future__ import annotations

from domain import errors

MAX_ID = 64
MAX_LABEL = 128


def check_id(field: str, value: str | None, limit: int = MAX_ID) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or len(value) > limit:
        raise errors.InvalidCommand(f"{field} must be a string of 1..{limit} characters",
                                    field=field)  # fmt: skip
    if any(ch in value for ch in "\x00\r\n\t"):
        raise errors.InvalidCommand(f"{field} must not contain control characters", field=field)


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
