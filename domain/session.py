"""The Session aggregate: the only write model of ctxstore.

A session's events are the single source of truth.  The aggregate keeps just
enough state to validate commands (which nodes exist, their edges, the head,
whether an agent run is active); node content lives only in the events and
in the projections built from them.  Every command validates *before* it
triggers an event, so replaying the log can never fail.
"""

from __future__ import annotations

import uuid
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
    check_model,
    check_window,
)
from domain.node_commands import NodeCommands
from domain.nodes import NodeRef
from domain.session_context import ContextCommands
from domain.tenancy import DEFAULT_TENANT

JSON = dict[str, Any]
# The events that add a node to the DAG (others, like HeadMoved, only name one).
NODE_EVENTS = (NodeAppended, AttachStaged, MergeCompleted)


class Session(NodeCommands, ContextCommands, Aggregate):
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
