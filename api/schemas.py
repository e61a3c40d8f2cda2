"""Request bodies and query strings, as pydantic models.

Bodies are validated strictly (``"5"`` is not an int, ``true`` is not a
version) and refuse unknown fields, so a typo is a 422 rather than a silently
ignored option.  Query strings are text, so their models coerce.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, get_type_hints

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    model_validator,
)
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from api import limits
from api.errors import DuplicateKey, MalformedJSON
from domain import commands
from projections.session_queries import decode_cursor

M = TypeVar("M", bound=BaseModel)


EARLIEST, LATEST = 1970, 2200  # years a recorded time may fall in


def _utc(value: datetime) -> datetime:
    try:
        value = value.astimezone(UTC)
    except OverflowError:  # pydantic reports only ValueError as a validation error
        raise ValueError("the time is out of range once converted to UTC") from None
    if not EARLIEST <= value.year <= LATEST:
        raise ValueError(f"the time must fall in the years {EARLIEST}..{LATEST} (UTC)")
    return value


# An ISO 8601 timestamp with its offset, stored as UTC.
Timestamp = Annotated[
    AwareDatetime,
    AfterValidator(_utc),
    Field(description=f"ISO 8601 with an offset, in the years {EARLIEST}..{LATEST}"),
]
# What domain.limits.check_window accepts.
ContextWindow = Annotated[int, Field(ge=256, le=100_000_000)]
# 'provider:model', as domain.limits.check_model accepts it.  Documented here
# but checked by the domain, whose refusal (invalid_command) names the rule.
MODEL_SCHEMA = {"minLength": 3, "maxLength": 128,
                "pattern": r"^[^:\u0000\r\n\t]{1,64}:[^\u0000\r\n\t]*$"}  # fmt: skip
Model = Annotated[str, Field(json_schema_extra=MODEL_SCHEMA)]
# Identifiers the domain checks (domain.limits.check_id): documented, refused there.
Id = Annotated[str, Field(json_schema_extra={"minLength": 1, "maxLength": 64})]
Label = Annotated[str, Field(json_schema_extra={"minLength": 1, "maxLength": 128})]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Command(Body):
    expected_version: int | None = Field(
        None, description="Refuse with 409 stale_version unless the session is at this version."
    )
    at: Timestamp | None = Field(None, description="When it happened (default: now).")


class StartSession(Body):
    title: str = ""
    model: Model = Field("openai:gpt-4o", description="'provider:model'")
    context_window: ContextWindow | None = None
    at: Timestamp | None = None


class AppendNode(Command):
    role: str = Field(description="user | assistant | tool | system")
    node_id: str | None = Field(None, min_length=1)
    name: str | None = None
    input: Any = None
    output: Any = None
    predecessor: str | None = None
    caller: str | None = None
    call_id: Id | None = None
    reads: list[str] | None = None
    metadata: dict[str, Any] | None = None


class BatchNode(Body):
    """One entry of a batch: a node, or (with ``sibling_of`` and ``kind``) a version of one."""

    role: str | None = Field(None, description="user | assistant | tool | system; a version "
                             "may leave it out (it keeps its node's role)")  # fmt: skip
    node_id: str | None = Field(None, min_length=1)
    name: str | None = None
    input: Any = None
    output: Any = None
    predecessor: str | None = Field(None, description="may name an earlier node of the batch")
    caller: str | None = Field(None, description="may name an earlier node of the batch")
    call_id: Id | None = None
    reads: list[str] | None = None
    metadata: dict[str, Any] | None = None
    sibling_of: str | None = Field(None, description="make this entry a version of that node")
    kind: Literal["retry", "edit"] | None = Field(
        None, description="with sibling_of: a new sample of the same prompt, or an edit"
    )
    at: Timestamp | None = None


class AppendBatch(Command):
    """Several nodes in one atomic command: all of them are stored, or none."""

    nodes: list[BatchNode] = Field(min_length=1, max_length=1000)


class AddSibling(Command):
    """Retry or edit: the body is the new version's content; the route says which
    (a retry is a new sample of the same prompt, so new content is expected)."""

    input: Any = None
    output: Any = None
    name: str | None = None
    node_id: str | None = Field(None, min_length=1)
    metadata: dict[str, Any] | None = None


class Checkout(Command):
    node_id: Id
    version: int | None = Field(None, description="1-based sibling version of node_id")


class Branch(Command):
    """``expected_version`` is the source session's: branching from an unseen chain is stale."""

    node_id: Id
    title: str | None = None


class NodeRef(Command):
    node_id: Id


class Attach(Command):
    source_session: str
    source_head: str | None = None


class Peer(Body):
    session_id: str | None = Field(None, description="default: this session")
    node_id: Id


class Merge(Command):
    peers: list[Peer]


class Usage(Command):
    """One request's usage: the provider's ``usage`` object as it came back, or flat fields.

    ``usage`` is read in its provider's convention (OpenAI's prompt_tokens
    include the cached ones; Anthropic's input_tokens exclude cache reads
    and writes).  The flat fields are ctxstore's own: ``input_tokens``
    excludes ``cache_read`` and ``cache_creation``.
    """

    request_id: Label
    usage: dict[str, Any] | None = Field(
        None, description="the provider's usage object, verbatim (OpenAI or Anthropic shape)"
    )
    input_tokens: int | None = None  # range checked by the domain (invalid_command), as for the CLI
    cache_read: int = 0
    cache_creation: int = 0
    output_tokens: int = 0
    provider: Id | None = Field(None, description="default: the session model's provider")
    head_node: str | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> Usage:
        if (self.usage is None) == (self.input_tokens is None):
            raise ValueError("give either usage (the provider's object) or input_tokens")
        return self


class StartRun(Command):
    run_id: Id | None = None


class FinishRun(Command):
    status: Label = "completed"


class SwitchModel(Command):
    model: Model = Field(description="'provider:model'")
    context_window: ContextWindow | None = None


class ConfigureCompaction(Command):
    """Each field ``null`` (or left out) to clear it."""

    instructions: str | None = Field(
        None, max_length=4_000, description="given to the summarizer with every request"
    )
    summarizer_model: str | None = Field(
        None, min_length=1, max_length=128, description="the model an LLM summarizer uses"
    )


class ToolSpec(Body):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = Field(None, max_length=10_000)
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object"}, description="a JSON schema of type object"
    )


class DeclareTools(Command):
    """The tools every request offers from now on; each declaration replaces the last."""

    tools: list[ToolSpec] = Field(max_length=128)


class Compact(Body):
    expected_version: int | None = None


@cache
def body_of(
    command: type[commands.Command], in_path: tuple[str, ...] = ("session_id",)
) -> type[Command]:
    """The body of ``command`` derived from its dataclass, for a command with no hand-written one.

    Its fields, less those the path carries (``in_path``) and the tenant (the
    API key's), validated like the hand-written bodies (strict, unknown
    fields refused); ``expected_version`` and ``at`` are ``Command``'s. A
    command gathering stray arguments (``rest``) needs a hand-written body.
    """
    if command.rest is not None:
        raise TypeError(f"{command.__name__} gathers {command.rest!r}: write its body by hand")
    hints = get_type_hints(command)
    skip = {*in_path, "tenant", *Command.model_fields}
    defined: dict[str, Any] = {}
    for f in dataclasses.fields(command):
        if f.name in skip:
            continue
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = Field(default_factory=f.default_factory)
        else:
            default = ...
        defined[f.name] = (hints[f.name], default)
    doc = command.__doc__
    if (doc or "").startswith(f"{command.__name__}("):  # dataclass's signature, not a doc
        doc = None
    model: type[Command] = create_model(command.__name__, __base__=Command, __doc__=doc,
                                        **defined)  # fmt: skip
    return model


# ------------------------------------------------------------------ queries


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EventsQuery(Query):
    after: int = Field(0, ge=0, le=2**63 - 1,
                       description="return events with originator version > after")  # fmt: skip
    limit: int = Field(100, ge=1, le=1000)


def _cursor(value: str | None) -> str | None:
    if value is not None:
        decode_cursor(value)  # ValueError: a 422 naming the parameter
    return value


class SessionsQuery(Query):
    after: Annotated[str | None, AfterValidator(_cursor)] = Field(
        None, description="the `next` cursor of the previous page"
    )
    limit: int = Field(100, ge=1, le=1000)  # fmt: skip


class NodesQuery(Query):
    head: str | None = Field(None, description="the branch's last node (default: HEAD)")


class RenderQuery(Query):
    shape: Literal["neutral", "openai", "anthropic"] = "neutral"
    commit: str | None = None
    cache: bool = Field(
        False,
        description="anthropic shape: add prompt-cache breakpoints "
        "(cache_control) after the tools, the system prompt and the last message",
    )


class StreamQuery(Query):
    once: bool = Field(False, description="send the current state, then close")
    interval: float = Field(0.25, ge=0.05, le=10,
                            description="least seconds between two change frames")  # fmt: skip


class EmptyQuery(Query):
    pass


class EraseTenantQuery(Query):
    confirm: str = Field(min_length=1, max_length=64,
                         description="the caller's tenant again, or nothing is erased")  # fmt: skip


BODIES: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (StartSession, AppendNode, AppendBatch, AddSibling, Checkout, Branch, NodeRef, Attach,
              Merge, Usage, StartRun, FinishRun, SwitchModel, ConfigureCompaction, DeclareTools,
              Compact)
}  # fmt: skip


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(f"request body names the key {key!r} twice in one object")
        seen[key] = value
    return seen


def check_unique_keys(raw: bytes) -> None:
    """``DuplicateKey`` if an object in ``raw`` repeats a key (the parser keeps the last)."""
    if raw.count(b'"') < 4:  # no room for two keys
        return
    try:
        json.loads(raw, object_pairs_hook=_refuse_duplicates)
    except (ValueError, RecursionError):
        return  # not JSON, or too deep: the model's own parser says so


# Parsing megabytes takes tens of milliseconds: off the event loop, where it would stall
# every other request; a small body is parsed in place (a thread hop costs more).
PARSE_IN_THREAD_BYTES = 64 * 1024


async def parse_body(request: Request, model: type[M]) -> M:
    """The body as ``model``; an empty body counts as ``{}``."""
    raw = await request.body()
    if len(raw) > PARSE_IN_THREAD_BYTES:
        return await run_in_threadpool(_parse, request, raw, model)
    return _parse(request, raw, model)


def _parse(request: Request, raw: bytes, model: type[M]) -> M:
    if not raw.strip():
        raw = b"{}"
    limits.check_json(request, raw)
    check_unique_keys(raw)
    try:
        body = model.model_validate_json(raw)
    except ValidationError as exc:
        bad = [e for e in exc.errors(include_url=False) if e["type"] == "json_invalid"]
        if bad:
            raise MalformedJSON(f"request body is not valid JSON: {bad[0]['msg']}") from None
        raise
    limits.check_content(request, body)
    return body


def parse_query(request: Request, model: type[M]) -> M:
    return model.model_validate(dict(request.query_params))
