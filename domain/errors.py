"""Domain refusals, each with a stable machine-readable code.

A refusal carries a machine code and a message only: the domain knows no
transport. ``api.errors.STATUS`` maps each class to its HTTP status, so a
refusal raised anywhere below the API reaches the client with the same code
the tests assert on.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A command the domain refuses; nothing has been stored when raised."""

    code: str = "domain_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(DomainError):
    code = "not_found"


class SessionNotFound(NotFound):
    code = "session_not_found"


class NodeNotFound(NotFound):
    code = "node_not_found"


class InvalidEdge(DomainError):
    """Predecessor/caller missing, both given, or pointing at the wrong kind of node."""

    code = "invalid_edge"


class CycleRefused(DomainError):
    code = "cycle"


class DuplicateNode(DomainError):
    code = "duplicate_node"


class AgentRunning(DomainError):
    code = "agent_running"


class AgentNotRunning(DomainError):
    code = "agent_not_running"


class StaleVersion(DomainError):
    """Optimistic concurrency: the caller saw an older version of the session."""

    code = "stale_version"


class InvalidCommand(DomainError):
    code = "invalid_command"


class MergeRefused(DomainError):
    code = "merge_refused"


class NothingToCompact(DomainError):
    code = "nothing_to_compact"


class InvalidIdempotencyKey(DomainError):
    code = "invalid_idempotency_key"


class IdempotencyKeyReused(DomainError):
    """The same key came with another request: the client mixed up its keys."""

    code = "idempotency_key_reused"


class WriteContention(Exception):
    """Other writers kept winning the race for a session: nothing of this command is stored.

    Not a ``DomainError``: the caller named no version, so the command is not
    stale, just unlucky; the API answers 503 with Retry-After.
    """
