"""What a command's answer says: its result, and which follow-up work failed.

Once a command's events are stored, its answer is success: a failure of the
work that follows it (the projection catching up, auto-compaction calling a
summarizer) is reported beside the result, never instead of it.  Turning a
stored command into an error made clients retry it and store it twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from domain import errors
from domain.summarizer import SummarizerError
from projections.store import DATABASE_ERRORS
from projections.tracking import PartitionCountChanged

log = logging.getLogger("ctxstore.runtime")


@dataclass
class Executed:
    """A stored command's result; ``follow_up`` names each follow-up step that failed."""

    result: Any
    follow_up: dict[str, Any] = field(default_factory=dict)
    replayed: bool = False  # the result of the earlier command that used the same key
    folded_tokens: int = 0  # a summary: the tokens of the items it covers (telemetry)

    def failed(self, step: str, exc: BaseException) -> None:
        log.warning("%s after a stored command failed", step, exc_info=exc)
        self.follow_up[step] = {"error": failure(exc)}


def failure(exc: BaseException) -> dict[str, str]:
    """A code and a message safe to show a client (no credentials, no upstream body)."""
    if isinstance(exc, SummarizerError):
        return {"code": "summarizer_failed", "message": str(exc)}
    if isinstance(exc, errors.DomainError):
        return {"code": exc.code, "message": exc.message}
    if isinstance(exc, errors.WriteContention):
        return {"code": "write_contention", "message": "other writers kept winning; not done"}
    if isinstance(exc, DATABASE_ERRORS):
        return {"code": "database_unavailable", "message": "the database is busy or unreachable"}
    if isinstance(exc, PartitionCountChanged):
        return {"code": exc.code, "message": str(exc)}
    return {"code": "internal", "message": "internal error"}
