"""Plain records the projector keeps in memory and writes as rows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from domain.context import Natural
from domain.node_text import canonical_json
from domain.tenancy import DEFAULT_TENANT
from projections.packed_text import pack, unpack

# Canonical JSON (one definition, shared with the write side): rebuilds rely on it.
dumps = canonical_json


def node_key(session_id: str, node_id: str) -> str:
    """How the projection's indexes name a node: its session and its id.

    Node ids are unique only in their session, so ``call_0`` of two sessions
    are two nodes; a session id is a UUID and holds no ``/``.
    """
    return f"{session_id}/{node_id}"


def key_session(key: str) -> str:
    """The session a node key names."""
    return key.split("/", 1)[0]


@dataclass
class NodeRow:
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
    meta: dict[str, Any]
    sibling_of: str | None
    version_kind: str | None
    created_at: float
    event_id: str
    notification_id: int
    token_counts: dict[str, Any] | None = None  # as the write side recorded them, if it did
    # What an item first shows of the node; filled on first use by
    # ``projections.item_rows.node_texts`` and never stored in the row.
    texts: Natural | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        return node_key(self.session_id, self.node_id)

    def stored_input(self) -> str | None:
        """The input's stored JSON text while it is not decoded yet: None for a node
        built from its event (``StoredNodeRow`` says otherwise)."""
        return None

    def to_row(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id, "session_id": self.session_id, "seq": self.seq,
            "role": self.role, "name": self.name, "input": pack(dumps(self.input)),
            "output": pack(dumps(self.output)), "parent": self.parent, "edge": self.edge,
            "call_id": self.call_id, "reads": dumps(self.reads), "meta": dumps(self.meta),
            "sibling_of": self.sibling_of, "version_kind": self.version_kind,
            "created_at": self.created_at, "event_id": self.event_id,
            "notification_id": self.notification_id,
            "token_counts": dumps(self.token_counts) if self.token_counts else None,
        }  # fmt: skip

    @classmethod
    def from_row(cls, row: Any) -> NodeRow:
        """The node a stored row holds (a ``ctx_nodes`` row, its columns in the table's
        order, which is this class's); its input, output and token counts are decoded
        when first read."""
        (node_id, session_id, seq, role, name, input, output, parent, edge, call_id, reads, meta,
         sibling_of, version_kind, created_at, event_id, notification_id, counts) = row  # fmt: skip
        token_counts: Any = _Stored(counts) if counts else None
        return StoredNodeRow(
            node_id, session_id, seq, role, name, _Stored(input), _Stored(output), parent, edge,
            call_id, _json(reads), _json(meta), sibling_of, version_kind, created_at, event_id,
            notification_id, token_counts,
        )  # fmt: skip


class _Stored:
    """A column's stored (maybe packed) JSON text, not decoded yet."""

    __slots__ = ("value",)

    def __init__(self, value: str | bytes) -> None:
        self.value = value

    def decoded(self) -> Any:
        return json.loads(unpack(self.value))


def _json(text: str) -> Any:
    """Most rows' lists and maps are empty: a fresh one, without the parser."""
    return [] if text == "[]" else {} if text == "{}" else json.loads(text)


class _Decoded:
    """A field whose stored JSON text waits in the instance until it is first read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name]
        if type(value) is _Stored:
            value = obj.__dict__[self.name] = value.decoded()
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value


class StoredNodeRow(NodeRow):
    """A node read back from its row, whose content is decoded on first use.

    A cold read of a session loads every node of it, but a long session's
    old tool results show only as stubs, which need nothing of the content:
    unpacking and parsing them all was a third of a fresh server's first
    render (issue 29).  The dataclass's ``__init__`` assigns through these
    descriptors, so the stored texts wait in the instance until read.
    """

    input = _Decoded()
    output = _Decoded()
    token_counts = _Decoded()

    def stored_input(self) -> str | None:
        """The input's stored JSON text while it is not decoded yet (canonical, as
        ``to_row`` wrote it), else None."""
        value = self.__dict__["input"]
        return unpack(value.value) if type(value) is _Stored else None


@dataclass
class SessionRow:
    session_id: str
    title: str
    model: str
    context_window: int | None
    head: str | None
    running: str | None
    pinned: list[str]
    branched_from: dict[str, Any] | None
    version: int
    created_at: float
    graph_position: int
    notification_id: int
    compaction: dict[str, Any] | None = None  # CompactionConfigured: instructions, model
    tools: list[dict[str, Any]] = field(default_factory=list)  # ToolsDeclared: the latest
    tenant: str = DEFAULT_TENANT  # SessionStarted v2: whose session it is (domain.tenancy)
    # (canonical JSON of ``tools``, its key): what commits name, worked out once a set
    tools_row: tuple[str, str] | None = field(default=None, repr=False, compare=False)

    def to_row(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id, "title": self.title, "model": self.model,
            "context_window": self.context_window, "head": self.head,
            "running": self.running, "pinned": dumps(self.pinned),
            "branched_from": dumps(self.branched_from) if self.branched_from else None,
            "version": self.version, "created_at": self.created_at,
            "graph_position": self.graph_position, "notification_id": self.notification_id,
            "compaction": dumps(self.compaction) if self.compaction else None,
            "tools": dumps(self.tools) if self.tools else None, "tenant": self.tenant,
        }  # fmt: skip

    @classmethod
    def from_row(cls, row: Any) -> SessionRow:
        m = row._mapping
        return cls(
            m["session_id"], m["title"], m["model"], m["context_window"], m["head"],
            m["running"], json.loads(m["pinned"]),
            json.loads(m["branched_from"]) if m["branched_from"] else None,
            m["version"], m["created_at"], m["graph_position"], m["notification_id"],
            json.loads(m["compaction"]) if m.get("compaction") else None,
            json.loads(m["tools"]) if m.get("tools") else [],
            m.get("tenant") or DEFAULT_TENANT,
        )  # fmt: skip


def parent_ids_of(text: str) -> list[str]:
    """``json.loads`` of a commit row's ``parent_ids``: the usual single parent without the
    parser (commit ids are hex: no quote, no escape), as a cold read reads one for every
    commit of a session (issue 29)."""
    inner = text[2:-2]
    if text[:2] == '["' and text[-2:] == '"]' and '"' not in inner and "\\" not in inner:
        return [inner]
    parents: list[str] = json.loads(text)
    return parents


@dataclass
class CommitMeta:
    commit_id: str
    session_id: str
    parent_ids: list[str]
    head_node_id: str
    checkpoint_id: str
    delta_count: int
    notification_id: int
    summary_request: dict[str, Any] | None = None
    total_tokens: int = 0
    over_window: dict[str, Any] | None = None
    rules_version: str = ""


@dataclass
class EventInfo:
    """What every projection step needs to know about the triggering event."""

    session_id: str
    event_id: str
    seq: int  # the event's position in its session (originator version)
    at: float  # the event's own timestamp: the only "now" rules may use
    notification_id: int


@dataclass
class Outbox:
    """Rows produced by one batch, written in one transaction with the tracking."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    new_sessions: dict[str, SessionRow] = field(default_factory=dict)
    changed_sessions: dict[str, SessionRow] = field(default_factory=dict)
    commits: list[dict[str, Any]] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)
    tool_sets: dict[str, str] = field(default_factory=dict)  # key -> the declared tools' JSON
    recall: list[dict[str, Any]] = field(default_factory=list)  # ctx_recall: nodes' texts

    def __bool__(self) -> bool:
        return bool(self.nodes or self.new_sessions or self.changed_sessions or self.commits
                    or self.transitions or self.usage or self.tool_sets or self.recall)  # fmt: skip
