"""The Session aggregate: the only write model of ctxstore.

A session's events are the single source of truth.  The aggregate keeps just
enough state to validate commands (which nodes exist, their edges, the head,
whether an agent run is active); node content lives only in the events and
in the projections built from them.  Every command validates *before* it
triggers an event, so replaying the log can never fail.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from eventsourcing.domain import Aggregate

from domain import errors
from domain.events import (
    AgentRunFinished,
    AgentRunStarted,
    AttachStaged,
    HeadMoved,
    MergeCompleted,
    ModelSwitched,
    NodeAppended,
    NodePinned,
    NodeUnpinned,
    SessionStarted,
)
from domain.limits import (
    MAX_LABEL,
    check_id,
    check_json,
    check_label,
    check_model,
    check_node_id,
    check_window,
)
from domain.node_claim import claim_event
from domain.node_text import node_blocks, node_texts, remember_json, remembered_json
from domain.nodes import ROLES, NodeRef
from domain.session_context import ContextCommands
from domain.tenancy import DEFAULT_TENANT
from domain.tokens import node_token_counts

JSON = dict[str, Any]
# How a sibling version relates to the node it is a version of: a retry asks the
# same prompt again for a new sample (its content may well differ), an edit
# changes the node itself.
VERSION_KINDS = ("retry", "edit")
# The events that add a node to the DAG (others, like HeadMoved, only name one).
NODE_EVENTS = (NodeAppended, AttachStaged, MergeCompleted)


def content_digest(role: str, name: str | None, input: Any, output: Any) -> str:
    """A short digest of a node's content, recorded with it (for audit and dedup).

    It no longer decides retry versus edit: a regenerated answer is a retry
    even though its text differs, so the caller says which it is.
    """
    # ``json.dumps([role, name, input, output], sort_keys=True, default=str)``, hashed
    # part by part so a large text's JSON its command remembered is not made again
    digest = hashlib.sha256(b"[")
    for index, part in enumerate((role, name, input, output)):
        encoded = remembered_json(part) or json.dumps(part, sort_keys=True, default=str)
        digest.update(((", " if index else "") + encoded).encode())
    digest.update(b"]")
    return digest.hexdigest()[:16]


def check_content(input: Any, output: Any, metadata: JSON | None) -> None:
    check_json("input", input)
    check_json("output", output)
    check_json("metadata", metadata)


class Session(ContextCommands, Aggregate):
    """One conversation: an append-only DAG of nodes plus its HEAD."""

    Started = SessionStarted
    # v2: ``compaction`` (CompactionConfigured); v3: ``tenant``.  Snapshots of
    # older versions are brought up to date as they load.
    class_version = 3

    @staticmethod
    def upcast_v1_v2(state: JSON) -> None:
        state.setdefault("compaction", {"instructions": None, "summarizer_model": None})

    @staticmethod
    def upcast_v2_v3(state: JSON) -> None:
        state.setdefault("tenant", DEFAULT_TENANT)  # stored before tenants existed

    def __init__(
        self,
        title: str,
        model: str,
        branched_from: JSON | None = None,
        context_window: int | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        self.title = title
        self.tenant = tenant
        self.model = model
        self.context_window = context_window
        self.branched_from = branched_from
        self.nodes: dict[str, JSON] = {}
        self.next_seq = 1
        self.head: str | None = branched_from["node_id"] if branched_from else None
        self.running: str | None = None
        self.compaction: JSON = {"instructions": None, "summarizer_model": None}
        # A branch keeps the pins its source had on the chain it branched from.
        self.pinned: list[str] = list(branched_from.get("pinned", [])) if branched_from else []

    def collect_events(self) -> Sequence[Any]:
        """The new events, then a claim of each new node's id (``domain.node_claim``).

        The claims go into the same atomic write as the nodes, so an id a
        concurrent writer just gave a node of this session fails the whole
        command.  They are emitted here,
        as events are collected for saving, and never when events are
        replayed, so reloading a session cannot claim anything twice.
        """
        events = list(super().collect_events())
        sid = str(self.id)
        claims = [claim_event(e.node_id, sid, e.timestamp) for e in events
                  if isinstance(e, NODE_EVENTS)]  # fmt: skip
        return events + claims

    # ----------------------------------------------------------------- queries

    def node(self, node_id: str) -> NodeRef:
        raw = self.nodes.get(node_id)
        if raw is None:
            if self.branched_from and node_id == self.branched_from["node_id"]:
                return NodeRef.branch_point(node_id, self.branched_from.get("role", "assistant"))
            raise errors.NodeNotFound(f"unknown node {node_id!r}", node_id=node_id)
        return NodeRef.from_json(node_id, raw)

    def knows(self, node_id: str) -> bool:
        if node_id in self.nodes:
            return True
        return bool(self.branched_from and node_id == self.branched_from["node_id"])

    def pins_on_chain(self, node_id: str) -> list[str]:
        """The pins a branch made at ``node_id`` inherits: those on the chain it sees.

        That is the node's ancestors, the tool calls of the assistants among
        them, and pins this session itself inherited (which lie further up).
        """
        chain: set[str] = set()
        cursor: str | None = node_id
        while cursor is not None and cursor in self.nodes and cursor not in chain:
            chain.add(cursor)
            cursor = self.nodes[cursor]["parent"]
        return [
            pin for pin in self.pinned
            if pin not in self.nodes or pin in chain or self.nodes[pin]["parent"] in chain
            and self.nodes[pin]["edge"] == "caller"
        ]  # fmt: skip

    def siblings(self, node_id: str) -> list[str]:
        """Versions of a node: same parent and same slot, in seq order."""
        ref = self.node(node_id)
        if ref.external:
            return [node_id]
        return [
            nid
            for nid, raw in self.nodes.items()
            if raw["parent"] == ref.parent and raw["slot"] == ref.slot
        ]

    # ---------------------------------------------------------------- commands

    def expect_version(self, expected: int | None) -> None:
        if expected is not None and expected != self.version:
            raise errors.StaleVersion(
                f"session is at version {self.version}, not {expected}",
                expected=expected,
                actual=self.version,
            )

    def append_node(
        self,
        role: str,
        *,
        node_id: str | None = None,
        name: str | None = None,
        input: Any = None,
        output: Any = None,
        predecessor: str | None = None,
        caller: str | None = None,
        call_id: str | None = None,
        reads: list[str] | None = None,
        metadata: JSON | None = None,
        at: datetime | None = None,
        sibling_of: str | None = None,
        version_kind: str | None = None,
    ) -> str:
        if role not in ROLES:
            raise errors.InvalidCommand(f"role must be one of {sorted(ROLES)}", role=role)
        check_node_id(node_id)
        check_id("call_id", call_id)
        check_label("name", name, MAX_LABEL)
        check_content(input, output, metadata)
        node_id = node_id or str(uuid.uuid4())
        if self.knows(node_id):
            raise errors.DuplicateNode(f"node {node_id!r} already exists", node_id=node_id)
        # Before resolving the edge: a parent that is the new node itself is not
        # yet known, so resolving first would report it as an unknown node.
        if node_id in (predecessor, caller):
            raise errors.CycleRefused("a node cannot be its own parent", node_id=node_id)
        predecessor, caller = self._resolve_edge(role, predecessor, caller)
        for read in reads or []:
            if not self.knows(read):
                raise errors.NodeNotFound(f"read of unknown node {read!r}", node_id=read)
        remember_json(input, output)  # for the event, its digest and the projection
        self.trigger_event(
            NodeAppended,
            node_id=node_id,
            seq=self.next_seq,
            role=role,
            name=name,
            input=input,
            output=output,
            predecessor=predecessor,
            caller=caller,
            call_id=(call_id or node_id) if role == "tool" else None,
            reads=list(reads or []),
            metadata=dict(metadata or {}),
            sibling_of=sibling_of,
            version_kind=version_kind,
            digest=content_digest(role, name, input, output),
            token_counts=node_token_counts(
                *node_texts(role, input, output), node_blocks(role, input, output)
            ),
            timestamp=at,
        )
        return node_id

    def _resolve_edge(
        self, role: str, predecessor: str | None, caller: str | None
    ) -> tuple[str | None, str | None]:
        if predecessor is not None and caller is not None:
            raise errors.InvalidEdge("give predecessor or caller, not both")
        if role == "tool":
            if predecessor is not None:
                raise errors.InvalidEdge("a tool node hangs off its caller, not a predecessor")
            caller = caller or self._default_caller()
            if self.node(caller).role != "assistant":
                raise errors.InvalidEdge("a tool node's caller must be an assistant node")
            return None, caller
        if caller is not None:
            raise errors.InvalidEdge("only tool nodes have a caller")
        if predecessor is None:
            if self.head is None:
                return None, None
            return self.head, None
        self.node(predecessor)
        return predecessor, None

    def _default_caller(self) -> str:
        if self.head is None:
            raise errors.InvalidEdge("a tool node needs an assistant caller")
        ref = self.node(self.head)
        if ref.role == "assistant":
            return ref.node_id
        if ref.role == "tool" and ref.parent:
            return ref.parent
        raise errors.InvalidEdge("a tool node needs an assistant caller")

    def add_sibling(
        self,
        of: str,
        *,
        kind: str,
        input: Any = None,
        output: Any = None,
        name: str | None = None,
        node_id: str | None = None,
        metadata: JSON | None = None,
        at: datetime | None = None,
    ) -> str:
        """A sibling version of ``of``: ``kind`` says whether it is a retry or an edit.

        The caller knows which it is; the content cannot tell: a retry is a
        new sample of the same prompt, so its text is usually new.
        """
        if kind not in VERSION_KINDS:
            raise errors.InvalidCommand("kind must be 'retry' or 'edit'", kind=kind)
        self._refuse_while_running(kind)
        ref = self.node(of)
        if ref.role not in ROLES:  # an attach or a merge: nothing to say again
            raise errors.InvalidCommand(f"a {ref.role} node has no versions", node_id=of)
        if ref.external:
            raise errors.InvalidCommand("retry the branch point in its own session", node_id=of)
        name = name if name is not None else ref.name
        if ref.parent is None:
            return self._append_root_sibling(ref, kind, input, output, name, node_id, metadata, at)
        return self.append_node(
            ref.role,
            node_id=node_id,
            name=name,
            input=input,
            output=output,
            call_id=ref.slot if ref.edge == "caller" else None,
            metadata=metadata,
            at=at,
            sibling_of=of,
            version_kind=kind,
            predecessor=None if ref.edge == "caller" else ref.parent,
            caller=ref.parent if ref.edge == "caller" else None,
        )

    def _append_root_sibling(
        self,
        ref: NodeRef,
        kind: str,
        input: Any,
        output: Any,
        name: str | None,
        node_id: str | None,
        metadata: JSON | None,
        at: datetime | None,
    ) -> str:
        """A second root: append_node would default the predecessor to HEAD."""
        check_node_id(node_id)
        check_label("name", name, MAX_LABEL)
        check_content(input, output, metadata)
        node_id = node_id or str(uuid.uuid4())
        if self.knows(node_id):
            raise errors.DuplicateNode(f"node {node_id!r} already exists", node_id=node_id)
        remember_json(input, output)  # for the event, its digest and the projection
        self.trigger_event(
            NodeAppended,
            node_id=node_id, seq=self.next_seq, role=ref.role, name=name,
            input=input, output=output, predecessor=None, caller=None, call_id=None,
            reads=[], metadata=dict(metadata or {}), sibling_of=ref.node_id,
            version_kind=kind, digest=content_digest(ref.role, name, input, output),
            token_counts=node_token_counts(*node_texts(ref.role, input, output),
                                           node_blocks(ref.role, input, output)),
            timestamp=at,
        )  # fmt: skip
        return node_id

    def checkout(self, node_id: str, version: int | None = None, at: datetime | None = None) -> str:
        """Move HEAD (display only).  ``version`` picks the N-th sibling, 1-based."""
        target = node_id
        if version is not None:
            versions = self.siblings(node_id)
            if not 1 <= version <= len(versions):
                raise errors.InvalidCommand(
                    f"version must be within 1..{len(versions)}", versions=len(versions)
                )
            target = versions[version - 1]
        self.node(target)
        self.trigger_event(HeadMoved, node_id=target, previous=self.head, timestamp=at)
        return target

    def start_run(self, run_id: str | None = None, at: datetime | None = None) -> str:
        check_id("run_id", run_id)
        if self.running:
            raise errors.AgentRunning("an agent run is already active", run_id=self.running)
        run_id = run_id or str(uuid.uuid4())
        self.trigger_event(AgentRunStarted, run_id=run_id, timestamp=at)
        return run_id

    def finish_run(self, status: str = "completed", at: datetime | None = None) -> None:
        check_id("status", status, MAX_LABEL)
        if not self.running:
            raise errors.AgentNotRunning("no agent run is active")
        self.trigger_event(AgentRunFinished, run_id=self.running, status=status, timestamp=at)

    def switch_model(
        self, model: str, context_window: int | None = None, at: datetime | None = None
    ) -> None:
        check_model(model)
        check_window(context_window)
        self.trigger_event(ModelSwitched, model=model, context_window=context_window, timestamp=at)

    def pin(self, node_id: str, at: datetime | None = None) -> None:
        self.node(node_id)
        if node_id not in self.pinned:
            self.trigger_event(NodePinned, node_id=node_id, timestamp=at)

    def unpin(self, node_id: str, at: datetime | None = None) -> None:
        if node_id not in self.pinned:  # a pin a branch inherited names a node further up
            self.node(node_id)
        if node_id in self.pinned:
            self.trigger_event(NodeUnpinned, node_id=node_id, timestamp=at)

    def _refuse_while_running(self, what: str) -> None:
        if self.running:
            raise errors.AgentRunning(f"cannot {what} while an agent run is active",
                                      run_id=self.running)  # fmt: skip
