"""What every route answers, as pydantic models: the OpenAPI document and the client share them.

Every model allows additional properties: the server may add fields (an
``over_window`` flag, a ``follow_up`` hint) without breaking a client built
against an older document, and the document says so.  The fields listed
are always present (a value may be ``null`` where the type says so).

This module imports nothing of the server, so ``api.client`` can use it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


# ---------------------------------------------------------------- commands


class CommandAnswer(Answer):
    """Every command answers the session it changed and that session's version after it."""

    session_id: str
    version: int


class SessionCreated(CommandAnswer):
    pass


class NodeAdded(CommandAnswer):
    node_id: str


class BatchAppended(CommandAnswer):
    node_ids: list[str]


class VersionAdded(CommandAnswer):
    node_id: str
    sibling_of: str
    kind: Literal["retry", "edit"]


class CheckedOut(CommandAnswer):
    head: str


class BranchPoint(Answer):
    session_id: str
    node_id: str


class Branched(CommandAnswer):
    branched_from: BranchPoint


class PinChanged(CommandAnswer):
    node_id: str
    pinned: bool


class UsageRecorded(CommandAnswer):
    request_id: str
    total_used: int


class RunStarted(CommandAnswer):
    run_id: str


class RunFinished(CommandAnswer):
    status: str


class ModelChanged(CommandAnswer):
    model: str
    context_window: int | None


class ToolsDeclared(CommandAnswer):
    tools: list[dict[str, Any]]


class CompactionSet(CommandAnswer):
    instructions: str | None
    summarizer_model: str | None


class Compacted(CommandAnswer):
    summary_id: str
    covered: list[str]
    summarizer: str
    computed_for: str
    commit_id: str | None


# ----------------------------------------------------------------- queries


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


class Item(Answer):
    item_id: str
    source_node_id: str | None
    role: str
    state: str
    rendered: str
    tokens: int
    ord: int
    touched_at: float
    name: str | None
    call: str | None
    has_result: bool
    is_error: bool
    locked: bool
    base_locked: bool
    reason: str | None
    merged_into: str | None
    is_anchor: bool
    attached_from: str | None
    truncated: bool
    level: int = 0
    dedup_of: str | None = None
    blocks: list[dict[str, Any]] | None = None
    call_id: str | None = None


class Commit(Answer):
    id: str
    session_id: str
    parent_ids: list[str]
    head_node_id: str
    rules_version: str
    total_tokens: int
    event_id: str
    event_seq: int
    created_at: float
    summary_request: dict[str, Any] | None
    tools: list[dict[str, Any]] = []
    items: list[Item]


class CommitTransitions(Answer):
    session_id: str
    commit_id: str
    transitions: list[dict[str, Any]]


class ToolsList(Answer):
    session_id: str
    tools: list[dict[str, Any]]


class Rendered(Answer):
    session_id: str
    commit_id: str
    head_node_id: str
    version: int
    shape: Literal["neutral", "openai", "anthropic"]
    over_window: bool = False
    shortfall: int = 0
    request: dict[str, Any]


class TimelineEntry(Answer):
    commit_id: str
    head_node_id: str
    parent_ids: list[str]
    event_seq: int
    total_tokens: int
    counts: dict[str, int]
    rules_version: str
    created_at: float
    needs_summary: bool


class Timeline(Answer):
    session_id: str
    commits: list[TimelineEntry]


class ItemNow(Answer):
    item_id: str
    state: str
    locked: bool
    reason: str | None
    tokens: int


class TransitionRow(Answer):
    item_id: str
    from_state: str
    to_state: str
    rule: str
    rules_version: str
    event_id: str
    event_seq: int
    commit_id: str
    inputs: str


class ItemHistory(ItemNow):
    """An item the node stands behind besides ``current``: a copy, or what an attach staged."""

    attached_from: str | None
    transitions: list[TransitionRow]


class Explanation(Answer):
    session_id: str
    node_id: str
    current: ItemNow | None
    transitions: list[TransitionRow]
    copies: list[ItemHistory] = []
    staged: list[ItemHistory] = []


class Occupancy(Answer):
    session_id: str
    model: str
    window: int
    head_node_id: str | None
    commit_id: str | None
    total_used: int
    basis: Literal["measured", "estimated"]
    estimated: int
    calibration: float | None
    request_id: str | None


class BudgetUsed(Answer):
    system: int
    tools: int
    history: int


class BudgetSplit(Answer):
    window: int
    window_source: str
    system: int
    tools: int
    output_reserve: int
    history: int
    compact_at: int
    emergency_at: int
    used: BudgetUsed
    status: str
    model: str
    limit: int | None = None
    request_tokens: int | None = None
    over_window: bool = False
    shortfall: int = 0
    over_window_reason: str | None = None


class StreamEvent(Answer):
    """One server-sent event of ``/stream`` (its schema describes each event).

    ``data`` is JSON: an ``Occupancy`` for ``occupancy``, ``{session_id,
    commits}`` (timeline entries) for ``timeline`` and ``timeline_append``.
    """

    event: Literal["occupancy", "timeline", "timeline_append", "error"]
    data: str = Field(json_schema_extra={"contentMediaType": "application/json"})
    id: str | None = None


class Health(Answer):
    status: str
    position: int


class OpenAPIDocument(Answer):
    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
