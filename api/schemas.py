"""Request bodies, as pydantic models.

Bodies are validated strictly (``"5"`` is not an int, ``true`` is not a
version) and refuse unknown fields, so a typo is a 422 rather than a silently
ignored option.  ``api.body_parsing`` reads a request's body into one of them;
query strings, which coerce, are ``api.query_params``'.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, Any, Literal, get_type_hints

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    create_model,
    model_validator,
)

from domain import commands

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


BODIES: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (StartSession, AppendNode, AppendBatch, AddSibling, Checkout, Branch, NodeRef, Attach,
              Merge, Usage, StartRun, FinishRun, SwitchModel, ConfigureCompaction, DeclareTools,
              Compact)
}  # fmt: skip
