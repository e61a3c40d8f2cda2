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
        m = row._mapping
        return cls(
            m["node_id"], m["session_id"], m["seq"], m["role"], m["name"],
            json.loads(unpack(m["input"])), json.loads(unpack(m["output"])), m["parent"], m["edge"],
            m["call_id"], json.loads(m["reads"]), json.loads(m["meta"]), m["sibling_of"],
            m["version_kind"], m["created_at"], m["event_id"], m["notification_id"],
            json.loads(m["token_counts"]) if m["token_counts"] else None,
        )  # fmt: skip


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
