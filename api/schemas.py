"""Request bodies and query strings, as pydantic models.

Bodies are validated strictly (``"5"`` is not an int, ``true`` is not a
version) and refuse unknown fields, so a typo is a 422 rather than a silently
ignored option.  Query strings are text, so their models coerce.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from api.errors import MalformedJSON

M = TypeVar("M", bound=BaseModel)


def _utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # pydantic reports only ValueError as a validation error
        raise ValueError("the time is out of range once converted to UTC") from None


# An ISO 8601 timestamp with its offset, stored as UTC.
Timestamp = Annotated[AwareDatetime, AfterValidator(_utc)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Command(Body):
    expected_version: int | None = Field(
        None, description="Refuse with 409 stale_version unless the session is at this version."
    )
    at: Timestamp | None = Field(None, description="When it happened (default: now).")


class StartSession(Body):
    title: str = ""
    model: str = Field("openai:gpt-4o", description="'provider:model'")
    context_window: int | None = Field(None, gt=0)
    at: Timestamp | None = None


class AppendNode(Command):
    role: str = Field(description="user | assistant | tool | system")
    node_id: str | None = Field(None, min_length=1)
    name: str | None = None
    input: Any = None
    output: Any = None
    predecessor: str | None = None
    caller: str | None = None
    call_id: str | None = None
    reads: list[str] | None = None
    metadata: dict[str, Any] | None = None


class AddSibling(Command):
    """Retry or edit: the body is the new version's content; the route says which
    (a retry is a new sample of the same prompt, so new content is expected)."""

    input: Any = None
    output: Any = None
    name: str | None = None
    node_id: str | None = Field(None, min_length=1)
    metadata: dict[str, Any] | None = None


class Checkout(Command):
    node_id: str
    version: int | None = Field(None, description="1-based sibling version of node_id")


class Branch(Command):
    """``expected_version`` is the source session's: branching from an unseen chain is stale."""

    node_id: str
    title: str | None = None


class NodeRef(Command):
    node_id: str


class Attach(Command):
    source_session: str
    source_head: str | None = None


class Peer(Body):
    session_id: str | None = Field(None, description="default: this session")
    node_id: str


class Merge(Command):
    peers: list[Peer]


class Usage(Command):
    request_id: str
    input_tokens: int  # range checked by the domain (invalid_command), as for the CLI
    cache_read: int = 0
    output_tokens: int = 0
    provider: str | None = None
    head_node: str | None = None


class StartRun(Command):
    run_id: str | None = None


class FinishRun(Command):
    status: str = "completed"


class SwitchModel(Command):
    model: str = Field(description="'provider:model'")
    context_window: int | None = Field(None, gt=0)


class Compact(Body):
    expected_version: int | None = None


# ------------------------------------------------------------------ queries


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EventsQuery(Query):
    after: int = Field(0, ge=0, le=2**63 - 1,
                       description="return events with originator version > after")  # fmt: skip
    limit: int = Field(100, ge=1, le=1000)


class RenderQuery(Query):
    shape: Literal["neutral", "openai", "anthropic"] = "neutral"
    commit: str | None = None


class StreamQuery(Query):
    once: bool = Field(False, description="send the current state, then close")
    interval: float = Field(0.25, ge=0.05, le=10, description="seconds between polls")


class EmptyQuery(Query):
    pass


BODIES: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (StartSession, AppendNode, AddSibling, Checkout, Branch, NodeRef, Attach,
              Merge, Usage, StartRun, FinishRun, SwitchModel, Compact)
}  # fmt: skip


async def parse_body(request: Request, model: type[M]) -> M:
    """The body as ``model``; an empty body counts as ``{}``."""
    raw = await request.body()
    if not raw.strip():
        raw = b"{}"
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        bad = [e for e in exc.errors(include_url=False) if e["type"] == "json_invalid"]
        if bad:
            raise MalformedJSON(f"request body is not valid JSON: {bad[0]['msg']}") from None
        raise


def parse_query(request: Request, model: type[M]) -> M:
    return model.model_validate(dict(request.query_params))
