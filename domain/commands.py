"""Every command a session takes, as a type, and the one registry that runs them.

A command is a frozen dataclass naming its session and its arguments; the
HTTP routes (``api.routes_commands``) build one per request and
``service.runtime.Runtime.run`` hands it to ``handle``, which looks its
handler up by type. Auto-compaction follows the types of the events a
command recorded (``service.compaction.AUTO_COMPACT_AFTER``), so a new
command that appends nodes compacts like the others with no list to update.

``from_call`` keeps the older spelling, ``runtime.execute("append_node",
sid, role="user")``, for scripts and tests: it builds the same object.

The optional fields every session command shares: ``expected_version``
(optimistic concurrency: ``StaleVersion`` if the session moved on), ``at``
(the event time; now if None) and ``tenant`` (the caller's, from its key).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, ClassVar, Self
from uuid import UUID

from domain.application import CtxStore
from domain.errors import InvalidCommand

SessionId = UUID | str


@dataclass(frozen=True, kw_only=True)
class Command:
    """What all commands share; ``name`` is the ``CtxStore`` method it runs."""

    name: ClassVar[str]
    # The field holding keyword arguments ``from_call`` does not know by name
    # (a node's content, a usage report), passed on as they are.
    rest: ClassVar[str | None] = None

    @classmethod
    def build(cls, **kwargs: Any) -> Self:
        """The command from keyword arguments; those naming no field go to ``rest``."""
        if cls.rest is not None:
            names = {f.name for f in fields(cls)}
            stray = {k: kwargs.pop(k) for k in list(kwargs) if k not in names}
            kwargs[cls.rest] = {**kwargs.get(cls.rest, {}), **stray}
        return cls(**kwargs)


@dataclass(frozen=True, kw_only=True)
class StartSession(Command):
    name = "start_session"
    title: str = ""
    model: str = "openai:gpt-4o"
    context_window: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class Branch(Command):
    name = "branch"
    source_session: SessionId
    node_id: str
    title: str | None = None
    at: datetime | None = None
    expected_version: int | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class AppendNode(Command):
    """``node``: the node's own fields (role, input, output, name, node_id, at, ...)."""

    name = "append_node"
    rest = "node"
    session_id: SessionId
    expected_version: int | None = None
    tenant: str | None = None
    node: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AppendNodes(Command):
    name = "append_nodes"
    session_id: SessionId
    nodes: Sequence[Mapping[str, Any]]
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class AddSibling(Command):
    """A retry or an edit (``kind``) of node ``of``; ``node``: the new version's fields."""

    name = "add_sibling"
    rest = "node"
    session_id: SessionId
    of: str
    kind: str
    expected_version: int | None = None
    tenant: str | None = None
    node: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Checkout(Command):
    name = "checkout"
    session_id: SessionId
    node_id: str
    version: int | None = None
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class StartRun(Command):
    name = "start_run"
    session_id: SessionId
    run_id: str | None = None
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class FinishRun(Command):
    name = "finish_run"
    session_id: SessionId
    status: str = "completed"
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class SwitchModel(Command):
    name = "switch_model"
    session_id: SessionId
    model: str
    context_window: int | None = None
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class Pin(Command):
    name = "pin"
    session_id: SessionId
    node_id: str
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class Unpin(Pin):
    name = "unpin"


@dataclass(frozen=True, kw_only=True)
class Attach(Command):
    name = "attach"
    session_id: SessionId
    source_session: SessionId
    source_head: str | None = None
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class Merge(Command):
    name = "merge"
    session_id: SessionId
    peers: list[dict[str, str]]
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class MeasureUsage(Command):
    """``report``: what the client reported (request_id, usage, input_tokens, ..., at)."""

    name = "measure_usage"
    rest = "report"
    session_id: SessionId
    expected_version: int | None = None
    tenant: str | None = None
    report: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ConfigureCompaction(Command):
    name = "configure_compaction"
    session_id: SessionId
    instructions: str | None = None
    summarizer_model: str | None = None
    recall_tool: bool | None = None
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None
    only: tuple[str, ...] | None = None  # the settings it changes (None: all three)


@dataclass(frozen=True, kw_only=True)
class DeclareTools(Command):
    name = "declare_tools"
    session_id: SessionId
    tools: list[dict[str, Any]]
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


@dataclass(frozen=True, kw_only=True)
class RecordSummary(Command):
    name = "record_summary"
    session_id: SessionId
    covered: list[str]
    text: str
    summarizer: str
    commit: str
    expected_version: int | None = None
    at: datetime | None = None
    tenant: str | None = None


Handler = Callable[[CtxStore, Any], Any]

# The one registry: each command type and what runs it on the application.
HANDLERS: dict[type[Command], Handler] = {
    StartSession: lambda app, c: app.start_session(c.title, c.model, c.context_window, c.at,
                                                   tenant=c.tenant),
    Branch: lambda app, c: app.branch(c.source_session, c.node_id, c.title, c.at,
                                      c.expected_version, tenant=c.tenant),
    AppendNode: lambda app, c: app.append_node(c.session_id, c.expected_version, c.tenant,
                                               **c.node),
    AppendNodes: lambda app, c: app.append_nodes(c.session_id, c.nodes, c.expected_version,
                                                 c.at, c.tenant),
    AddSibling: lambda app, c: app.add_sibling(c.session_id, c.of, c.kind, c.expected_version,
                                               c.tenant, **c.node),
    Checkout: lambda app, c: app.checkout(c.session_id, c.node_id, c.version,
                                          c.expected_version, c.at, c.tenant),
    StartRun: lambda app, c: app.start_run(c.session_id, c.run_id, c.expected_version, c.at,
                                           c.tenant),
    FinishRun: lambda app, c: app.finish_run(c.session_id, c.status, c.expected_version, c.at,
                                             c.tenant),
    SwitchModel: lambda app, c: app.switch_model(c.session_id, c.model, c.context_window,
                                                 c.expected_version, c.at, c.tenant),
    Pin: lambda app, c: app.pin(c.session_id, c.node_id, c.expected_version, c.at, c.tenant),
    Unpin: lambda app, c: app.unpin(c.session_id, c.node_id, c.expected_version, c.at, c.tenant),
    Attach: lambda app, c: app.attach(c.session_id, c.source_session, c.source_head,
                                      c.expected_version, c.at, c.tenant),
    Merge: lambda app, c: app.merge(c.session_id, c.peers, c.expected_version, c.at, c.tenant),
    MeasureUsage: lambda app, c: app.measure_usage(c.session_id, c.expected_version, c.tenant,
                                                   **c.report),
    ConfigureCompaction: lambda app, c: app.configure_compaction(
        c.session_id, c.instructions, c.summarizer_model, c.expected_version, c.at, c.tenant,
        c.recall_tool, c.only),
    DeclareTools: lambda app, c: app.declare_tools(c.session_id, c.tools, c.expected_version,
                                                   c.at, c.tenant),
    RecordSummary: lambda app, c: app.record_summary(
        c.session_id, c.covered, c.text, c.summarizer, c.commit, c.expected_version, c.at,
        c.tenant),
}  # fmt: skip

BY_NAME: dict[str, type[Command]] = {cls.name: cls for cls in HANDLERS}


def handle(app: CtxStore, command: Command) -> Any:
    """Run ``command`` on ``app``: its handler's result (usually ``(result, version)``)."""
    handler = HANDLERS.get(type(command))
    if handler is None:
        raise InvalidCommand(f"unknown command {type(command).__name__!r}")
    return handler(app, command)


def from_call(name: str, /, *args: Any, **kwargs: Any) -> Command:
    """The command ``CtxStore.<name>(*args, **kwargs)`` would run, as its type.

    Positional arguments fill the fields in the method's order; with a
    ``rest`` field, keyword arguments that name no field go there.
    """
    cls = BY_NAME.get(name)
    if cls is None:
        raise InvalidCommand(f"unknown command {name!r}")
    names = [f.name for f in fields(cls) if f.name != cls.rest]
    if len(args) > len(names):
        raise TypeError(f"{name}() takes {len(names)} positional arguments, {len(args)} given")
    given = dict(zip(names, args, strict=False))
    if twice := set(given) & set(kwargs):
        raise TypeError(f"{name}() got multiple values for {sorted(twice)}")
    return cls.build(**given, **kwargs)
