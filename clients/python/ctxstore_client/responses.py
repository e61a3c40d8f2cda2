"""What the command routes answer, and the service's own answers, as pydantic models.

The OpenAPI document and the client share them. The reads answer models of
their own: ``ctxstore_client.session_responses`` (sessions, events, nodes, the DAG),
``ctxstore_client.context_responses`` (commits, items, renders, the timeline, explain,
occupancy, budget, ``/stream``) and ``ctxstore_client.erasure_responses``; all derive
from ``Answer`` here.

Every model allows additional properties: the server may add fields (an
``over_window`` flag, a ``follow_up`` hint) without breaking a client built
against an older document, and the document says so.  The fields listed
are always present (a value may be ``null`` where the type says so).

The client package holds them (it imports nothing of the server); the server
imports them from here, so its answers and the client's types are one.
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
    warnings: list[str] = Field(
        default_factory=list,
        description="e.g. the window assumed for a model the catalogue does not know",
    )


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
    warnings: list[str] = Field(default_factory=list)


class ToolsDeclared(CommandAnswer):
    tools: list[dict[str, Any]]


class CompactionSet(CommandAnswer):
    instructions: str | None
    summarizer_model: str | None
    recall_tool: bool | None = None  # null: the policy's ``recall_tool`` decides


class Compacted(CommandAnswer):
    summary_id: str
    covered: list[str]
    summarizer: str
    computed_for: str
    commit_id: str | None


# ----------------------------------------------------------------- service


class Health(Answer):
    status: str
    position: int
    large_body_lane: Literal["ready", "starting"] | None = Field(
        None, description="the helper process that serves large bodies (absent: no lane)"
    )


class KnownModel(Answer):
    model: str = Field(description="'provider:model'")
    window: int
    source: Literal["catalogue", "deployment"] = Field(
        description="built in, or added by the deployment (CTXSTORE_MODELS)"
    )


class ModelList(Answer):
    models: list[KnownModel]
    default_window: int = Field(description="what a session on any other model is assumed to get")


class Ready(Answer):
    status: Literal["ready", "not_ready"]
    ready: bool
    reason: str | None = None
    lag: dict[str, int] = Field(
        default_factory=dict, description="each partition's unprojected events of its own"
    )


class OpenAPIDocument(Answer):
    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
