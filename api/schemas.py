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
    title: str = Field("", description="a label for people (the inspector searches it)")
    model: Model = Field("openai:gpt-4o", description="'provider:model'")
    context_window: ContextWindow | None = Field(
        None,
        description="the model's window in tokens (default: its window in domain/catalogue.py)",
    )
    at: Timestamp | None = Field(None, description="When it happened (default: now).")


# What each field of a node means, shared by ``AppendNode`` and ``BatchNode``.
ROLE = (
    "user | assistant | tool | system. A tool node is one call and its result: it hangs off "
    "the assistant node that made the call (its caller)"
)
NODE_ID = "your id for the node (1..64 characters); default: a new UUID"
NAME = "a tool node's tool name (the function the model called)"
INPUT = (
    "what goes into the node: a user's or system's message (text or content blocks), or a "
    "tool call's arguments (JSON). An assistant node leaves it out"
)
OUTPUT = (
    "what comes out of the node: an assistant's answer (text or content blocks), or a tool's "
    "result. A user or system node leaves it out"
)
PREDECESSOR = (
    "the node this one follows (default: the head); not for tool nodes, which name a caller"
)
CALLER = (
    "a tool node's assistant node (default: the head's assistant, so a tool result appended "
    "right after its assistant turn needs none)"
)
CALL_ID = (
    "a tool node's id as the model gave it (OpenAI's tool_call id, Anthropic's tool_use id); "
    "the render pairs the call and its result by it (default: the node id)"
)
READS = "nodes this one looked at: reading a node keeps it from being cleared as idle"
METADATA = "any JSON object, stored with the node and never rendered"


class AppendNode(Command):
    """One node: a message (user, assistant, system) or a tool call with its result."""

    role: str = Field(description=ROLE)
    node_id: str | None = Field(None, min_length=1, description=NODE_ID)
    name: str | None = Field(None, description=NAME)
    input: Any = Field(None, description=INPUT)
    output: Any = Field(None, description=OUTPUT)
    predecessor: str | None = Field(None, description=PREDECESSOR)
    caller: str | None = Field(None, description=CALLER)
    call_id: Id | None = Field(None, description=CALL_ID)
    reads: list[str] | None = Field(None, description=READS)
    metadata: dict[str, Any] | None = Field(None, description=METADATA)


class BatchNode(Body):
    """One entry of a batch: a node, or (with ``sibling_of`` and ``kind``) a version of one."""

    role: str | None = Field(None, description="user | assistant | tool | system; a version "
                             "may leave it out (it keeps its node's role)")  # fmt: skip
    node_id: str | None = Field(None, min_length=1, description=NODE_ID)
    name: str | None = Field(None, description=NAME)
    input: Any = Field(None, description=INPUT)
    output: Any = Field(None, description=OUTPUT)
    predecessor: str | None = Field(
        None, description=PREDECESSOR + "; may name an earlier node of the batch"
    )
    caller: str | None = Field(None, description=CALLER + "; may name an earlier node of the batch")
    call_id: Id | None = Field(None, description=CALL_ID)
    reads: list[str] | None = Field(None, description=READS)
    metadata: dict[str, Any] | None = Field(None, description=METADATA)
    sibling_of: str | None = Field(None, description="make this entry a version of that node")
    kind: Literal["retry", "edit"] | None = Field(
        None, description="with sibling_of: a new sample of the same prompt, or an edit"
    )
    at: Timestamp | None = Field(None, description="When it happened (default: the batch's).")


class AppendBatch(Command):
    """Several nodes in one atomic command: all of them are stored, or none."""

    nodes: list[BatchNode] = Field(
        min_length=1, max_length=1000, description="the nodes, in order (1..1000)"
    )


class AddSibling(Command):
    """Retry or edit: the body is the new version's content; the route says which
    (a retry is a new sample of the same prompt, so new content is expected)."""

    input: Any = Field(None, description=INPUT)
    output: Any = Field(None, description=OUTPUT)
    name: str | None = Field(None, description=NAME)
    node_id: str | None = Field(None, min_length=1, description=NODE_ID)
    metadata: dict[str, Any] | None = Field(None, description=METADATA)


class Checkout(Command):
    """Move the head to a node: the next append follows it."""

    node_id: Id = Field(description="the node to move the head to")
    version: int | None = Field(None, description="1-based sibling version of node_id")


class Branch(Command):
    """``expected_version`` is the source session's: branching from an unseen chain is stale."""

    node_id: Id = Field(description="the node the new session's history ends at")
    title: str | None = Field(None, description="the new session's title")


class NodeRef(Command):
    node_id: Id = Field(description="the node (pin, unpin: its item is kept full, or no longer)")


class Attach(Command):
    """Bring another session's context (its commit at ``source_head``) in after the head."""

    source_session: str = Field(description="the session whose context is attached")
    source_head: str | None = Field(None, description="its node to attach at (default: its head)")


class Peer(Body):
    session_id: str | None = Field(None, description="default: this session")
    node_id: Id = Field(description="the head to merge in")


class Merge(Command):
    peers: list[Peer] = Field(description="the heads joined into this session's head")


class Usage(Command):
    """One request's usage: the provider's ``usage`` object as it came back, or flat fields.

    ``usage`` is read in its provider's convention (OpenAI's prompt_tokens
    include the cached ones; Anthropic's input_tokens exclude cache reads
    and writes).  The flat fields are ctxstore's own: ``input_tokens``
    excludes ``cache_read`` and ``cache_creation``.
    """

    request_id: Label = Field(description="the provider's id of the request (one report each)")
    usage: dict[str, Any] | None = Field(
        None, description="the provider's usage object, verbatim (OpenAI or Anthropic shape)"
    )
    # range checked by the domain (invalid_command), as for the CLI
    input_tokens: int | None = Field(
        None, description="prompt tokens not read from or written to the cache"
    )
    cache_read: int = Field(0, description="prompt tokens read from the provider's cache")
    cache_creation: int = Field(0, description="prompt tokens written to the provider's cache")
    output_tokens: int = Field(0, description="tokens the model generated")
    provider: Id | None = Field(None, description="default: the session model's provider")
    head_node: str | None = Field(
        None, description="the head the request was rendered at (default: the session's head)"
    )

    @model_validator(mode="after")
    def _one_shape(self) -> Usage:
        if (self.usage is None) == (self.input_tokens is None):
            raise ValueError("give either usage (the provider's object) or input_tokens")
        return self


class StartRun(Command):
    """An agent run starts: until it finishes, a retry, an edit, a merge or another run
    start are refused with 409 agent_running."""

    run_id: Id | None = Field(None, description="your id for the run (default: a new one)")


class FinishRun(Command):
    status: Label = Field("completed", description="how the run ended")


class SwitchModel(Command):
    model: Model = Field(description="'provider:model'")
    context_window: ContextWindow | None = Field(
        None, description="the new model's window in tokens (default: the catalogue's)"
    )


class ConfigureCompaction(Command):
    """A field left out keeps its value; ``null`` clears it (or, for ``recall_tool``, leaves
    the choice to the policy)."""

    instructions: str | None = Field(
        None, max_length=4_000,
        description="added to an LLM summarizer's structured prompt with every request "
        "(not in its place); the extractive summarizer has no prompt",
    )  # fmt: skip
    summarizer_model: str | None = Field(
        None, min_length=1, max_length=128, description="the model an LLM summarizer uses"
    )
    recall_tool: bool | None = Field(
        None, description="list the ``recall`` tool in this session's requests (true) or not "
        "(false), whatever the policy's ``recall_tool``; null follows the policy. From the "
        "next commit on: a change makes a new head commit, commits made are never rewritten",
    )  # fmt: skip


class ToolSpec(Body):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="the tool's name")
    description: str | None = Field(
        None, max_length=10_000, description="what the tool does, for the model"
    )
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object"}, description="a JSON schema of type object"
    )


class DeclareTools(Command):
    """The tools every request offers from now on; each declaration replaces the last."""

    tools: list[ToolSpec] = Field(
        max_length=128, description="every tool requests offer (0..128); [] offers none"
    )


class Compact(Body):
    """Summarize now what the rules would summarize when the window fills."""

    expected_version: int | None = Field(
        None, description="Refuse with 409 stale_version unless the session is at this version."
    )


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
