"""What the session, event, node and DAG reads answer (``api/routes_queries.py``).

Models as in ``ctxstore_client.responses``: additional properties allowed; nothing of the
server is imported: the server answers with these very models.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ctxstore_client.responses import Answer, BranchPoint


class SessionSummary(Answer):
    session_id: str
    title: str
    model: str
    head: str | None
    version: int
    running: str | None
    branched_from: BranchPoint | None
    created_at: float


class SessionPage(Answer):
    sessions: list[SessionSummary]
    next: str | None


class SessionCounts(Answer):
    nodes: int
    commits: int
    events: int
    usage: int


class SessionInfo(SessionSummary):
    context_window: int | None
    window: int
    window_source: str
    warnings: list[str] = Field(default_factory=list)
    pinned: list[str]
    head_commit_id: str | None
    counts: SessionCounts


class StoredEvent(Answer):
    type: str
    seq: int
    originator_id: str
    originator_version: int
    timestamp: str
    data: dict[str, Any]


class EventPage(Answer):
    session_id: str
    after: int
    events: list[StoredEvent]
    next: int | None
    next_after: int
    has_more: bool


class Node(Answer):
    node_id: str
    session_id: str
    seq: int
    role: str
    name: str | None
    input: Any
    output: Any
    parent: str | None
    edge: str
    call_id: str | None
    reads: list[str]
    metadata: dict[str, Any]
    sibling_of: str | None
    version_kind: str | None
    created_at: float


class BranchNodes(Answer):
    session_id: str
    version: int
    head: str | None
    nodes: list[Node]


class DagNode(Answer):
    node_id: str
    seq: int
    role: str
    name: str | None
    parent: str | None
    edge: str
    call_id: str | None
    version: int
    versions: int
    sibling_ids: list[str]
    version_kind: str | None
    created_at: float


class Dag(Answer):
    session_id: str
    head: str | None
    branched_from: BranchPoint | None
    running: str | None
    pinned: list[str]
    nodes: list[DagNode]
