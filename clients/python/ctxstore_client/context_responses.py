"""What the context reads answer: commits and their items, renders, the timeline,
``explain``, occupancy and budget, and ``/stream``'s events.

Models as in ``ctxstore_client.responses``: additional properties allowed; nothing of the
server is imported: the server answers with these very models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import ConfigDict, Field, WithJsonSchema

from ctxstore_client.render_schemas import request_schema, shape_rules
from ctxstore_client.responses import Answer

Shape = Literal["neutral", "openai", "anthropic", "responses", "gemini", "bedrock"]


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
    call_signature: str | None = None  # Gemini's thoughtSignature of a tool call


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
    """``request`` is the provider's JSON, typed per ``shape`` (``render_schemas``);
    ``left_out`` the provider-native blocks this shape could not carry; ``folded``
    the items a provider's compaction stands for in this shape (transition rows)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"allOf": cast(Any, shape_rules())})

    session_id: str
    commit_id: str
    head_node_id: str
    version: int
    shape: Shape
    over_window: bool = False
    shortfall: int = 0
    left_out: list[dict[str, Any]] = []
    folded: list[dict[str, Any]] = []
    warnings: list[str] = Field(default_factory=list)
    request: Annotated[dict[str, Any], WithJsonSchema(request_schema())]


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
    summarized_by: str | None = Field(
        None, description="for a summarized item, the summary the head shows in its place"
    )
    survived: list[str] = Field(
        default_factory=list,
        description="that summary's lines quoting this node's own text (whitespace collapsed, "
        "labels such as `user:` aside): what of the node the model still reads",
    )


class RecallHit(Answer):
    """A node whose original content matched, whatever its item shows now."""

    node_id: str
    session_id: str = Field(
        description="the node's own session (a branch source, an "
        "attached or merged one, or this one)"
    )
    role: str
    state: str = Field(description="its item's state at the head: full, aged, cleared, summarized")
    score: float = Field(description="the engine's relevance; higher is better")
    text: str = Field(
        description="the node's original content (masked when the policy redacts secrets)"
    )
    next_text: str = Field(
        "",
        description="the first 1,000 characters of the node after it under the head (a "
        "question's reply), masked alike; empty for the last",
    )


class Recall(Answer):
    hits: list[RecallHit]


class Occupancy(Answer):
    session_id: str
    model: str
    window: int
    warnings: list[str] = Field(default_factory=list)
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
    warnings: list[str] = Field(
        default_factory=list,
        description="e.g. the window assumed for a model the catalogue does not know",
    )
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
