"""The projection step: one domain event in, rows out.

``Projector.apply`` folds events into in-memory indexes and an ``Outbox`` of
rows; the caller writes the outbox and the tracking position in one
transaction.  Nothing here reads a clock or a database directly: stored
commits come in through ``load_rows`` (a port), so the same code runs live,
in a worker process, and in a rebuild.  What each event does is
``projections.event_steps``'; finding a commit and its items,
``projections.commit_lookup``'s.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from domain import events as ev
from domain.erasure import Erasure
from domain.idempotency import IdempotencyClaim
from domain.node_claim import NodeClaim
from domain.policy import Policy
from domain.working_context import WorkingContext
from projections.commit_lookup import CommitLookup, RowLoader
from projections.context_commit import build
from projections.dag_index import DagIndex
from projections.event_steps import HANDLERS
from projections.records import CommitMeta, EventInfo, NodeRow, Outbox, SessionRow, dumps
from projections.working_set import DEFAULT_BUDGET, LazyDict, RowSource, WorkingSet

# Warm working contexts a projector keeps (about one per session it projects
# lately).  Past it, a session's next commit loads its parent's items back from
# rows and indexes them again: with 16, 64 agents appending in turn on one
# partition made a rebuild (and every live append) do that for nearly every
# commit, 2.2x the time of 8 partitions of 8 sessions each (128: twice that
# many agents).  A context holds references to its items, which are small
# next to the node texts.
CACHE_SIZE = 128


class Projector(CommitLookup):
    def __init__(
        self,
        policy_at: Callable[[int], Policy],
        load_rows: RowLoader,
        source: RowSource | None = None,
        budget: int = DEFAULT_BUDGET,
    ) -> None:
        self.policy_at = policy_at
        self.load_rows = load_rows
        self.dag = DagIndex()
        # (session id, head node id) -> the newest commit that session made at that head
        self.latest_commit: dict[tuple[str, str], str] = {}
        self.commits: dict[str, CommitMeta] = {}
        # Without a source every session stays in memory (a rebuild, an import);
        # with one, only the sessions touched lately (``projections.working_set``).
        self.working: WorkingSet | None = None
        self.held_commits: dict[str, set[str]] = {}  # with a working set: session -> commits
        if source is not None:
            working = self.working = WorkingSet(source, self, budget)
            self.dag.nodes = LazyDict(working.fault_node)
            self.dag.by_seq = LazyDict(working.fault_session)
            self.commits = LazyDict(working.fault_commit)
            self.latest_commit = LazyDict(lambda key: working.fault_session(key[0]))
        self.contexts: OrderedDict[str, WorkingContext] = OrderedDict()
        self.pending: dict[str, dict[str, Any]] = {}  # commit rows not yet written
        self.outbox = Outbox()
        self.position = 0
        self._ordinal = 0

    # ------------------------------------------------------------ contexts

    def take(self, commit_id: str | None, policy: Policy) -> WorkingContext:
        """The working context of ``commit_id`` to build on (taken from the cache)."""
        if commit_id is None:
            return WorkingContext(policy)
        ctx = self.contexts.pop(commit_id, None)
        if ctx is not None and ctx.policy != policy:
            # Another policy (a restart with other settings, another rules
            # generation) may make other items agable: index the items again,
            # as a cold process would, so both age the same ones.
            ctx = WorkingContext.from_items(policy, [item.copy() for item in ctx.ordered()])
        if ctx is None:
            ctx = WorkingContext.from_items(policy, self.items_of(commit_id))
        return ctx

    def _keep(self, commit_id: str, ctx: WorkingContext) -> None:
        self.contexts[commit_id] = ctx
        while len(self.contexts) > CACHE_SIZE:
            self.contexts.popitem(last=False)

    # --------------------------------------------------------- working set

    def hold_node(self, node: NodeRow) -> None:
        self.dag.index(node)

    def hold_commit(self, meta: CommitMeta) -> None:
        self.commits[meta.commit_id] = meta
        self.latest_commit[(meta.session_id, meta.head_node_id)] = meta.commit_id
        self.held_commits.setdefault(meta.session_id, set()).add(meta.commit_id)

    def _hold_calls_of(self, caller: str) -> None:
        """Hold every session that can hang tools off the node keyed ``caller``: its
        own, and those branched at it (a tool's caller is a node its session knows).

        Only a call slot's versions need them all: what a head sees is its own
        chain's tools, and walking the chain brings those sessions in."""
        if self.working is None or caller not in self.dag.nodes:  # loads its session
            return
        for session_id in self.dag.branched_at.get(caller, ()):
            self.working.fault_session(session_id)

    def release_session(self, session_id: str) -> None:
        """Let a session's nodes and commits go: its own, found by session, not by
        scanning every commit held (a trim lets many sessions go at once)."""
        self.dag.forget_session(session_id)
        for commit_id in self.held_commits.pop(session_id, ()):
            meta = dict.pop(self.commits, commit_id, None)
            if meta is not None:  # its latest_commit keys are (session, a head it made)
                dict.pop(self.latest_commit, (session_id, meta.head_node_id), None)

    # --------------------------------------------------------------- apply

    def apply(self, event: Any, notification_id: int) -> None:
        if isinstance(event, NodeClaim.Event | IdempotencyClaim.Event | Erasure.Event):
            self.position = notification_id
            return
        info = EventInfo(
            session_id=str(event.originator_id),
            event_id=f"{event.originator_id}:{event.originator_version}",
            seq=event.originator_version,
            at=event.timestamp.timestamp(),
            notification_id=notification_id,
        )
        self._ordinal = 0
        if self.working is not None:
            self.working.touch(info.session_id)
        if isinstance(event, ev.SessionStarted):
            self._started(event, info)
        else:
            session = self.dag.sessions[info.session_id]
            session.version = info.seq
            session.notification_id = notification_id
            self._changed(session)
            step = HANDLERS.get(type(event))
            if step is not None:
                step(self, event, info, session)
        self.position = notification_id

    def _changed(self, session: SessionRow) -> None:
        if session.session_id not in self.outbox.new_sessions:
            self.outbox.changed_sessions[session.session_id] = session

    def _started(self, event: Any, info: EventInfo) -> None:
        branched = event.branched_from
        source = self.dag.sessions.get(branched["session_id"]) if branched else None
        session = SessionRow(
            info.session_id, event.title, event.model, event.context_window,
            branched["node_id"] if branched else None, None,
            sorted(branched.get("pinned", [])) if branched else [],
            {"session_id": branched["session_id"], "node_id": branched["node_id"]}
            if branched else None,
            info.seq, info.at, info.notification_id, info.notification_id,
            # a branch offers the tools its source declared, until it declares its own
            tools=list(source.tools) if source is not None else [], tenant=event.tenant,
        )  # fmt: skip
        self.dag.add_session(session)
        self.outbox.new_sessions[info.session_id] = session

    def commit_node(
        self, node: NodeRow, info: EventInfo, session: SessionRow,
        extra: Callable[[WorkingContext], None] | None = None,
        extra_parents: list[str] | None = None,
        skip: set[str] | None = None,
    ) -> None:  # fmt: skip
        """Choose the base commit for a new head node, then build on it."""
        prev = self.dag.previous(node)
        sid = session.session_id
        prev_commit = self.commit_at(sid, prev.node_id) if prev is not None else None
        parent = self.dag.parent_key(node)
        fast = (
            prev is not None
            and node.sibling_of is None
            and not self._reuses_call_slot(node)
            and prev_commit is not None
            and (parent == prev.key
                 or (prev.role == "tool" and self.dag.parent_key(prev) == parent))
        )  # fmt: skip
        removes: list[str] = []
        if fast:
            base_id: str | None = prev_commit
            new_nodes = [node]
        else:
            base_id = self.commit_at(sid, node.parent) if node.parent else None
            new_nodes, removes = self._diff(node, base_id)
            if skip:
                new_nodes = [n for n in new_nodes if n.node_id not in skip]
        self._build(session, node.node_id, base_id, info, new_nodes, removes, extra,
                    extra_parents or [])  # fmt: skip

    def _reuses_call_slot(self, node: NodeRow) -> bool:
        """A tool appended with an earlier call's ``call_id`` is a new version of it."""
        if node.role != "tool" or node.parent is None:
            return False
        slot = node.call_id or node.node_id
        caller = self.dag.ref(node.session_id, node.parent)
        self._hold_calls_of(caller)
        tools = (self.dag.nodes[key] for key in self.dag.tools_by_caller.get(caller, ()))
        return any(tool is not node and (tool.call_id or tool.node_id) == slot for tool in tools)

    def _diff(self, node: NodeRow, base_id: str | None) -> tuple[list[NodeRow], list[str]]:
        """What is new under ``node`` relative to the base, and what a retry superseded."""
        # Every visible node is of the head's lineage, where its id is its name.
        visible = self.dag.visible(node)
        wanted = {n.node_id for n in visible}
        slots = {(self.dag.parent_key(n), n.call_id or n.node_id) for n in visible
                 if n.role == "tool"}  # fmt: skip
        present: set[str] = set()
        removes: list[str] = []
        if base_id is not None:
            for item in self.items_as(base_id, node.session_id):
                if item.source_node_id is None or item.attached_from:
                    continue
                present.add(item.item_id)
                src = self.dag.find(node.session_id, item.source_node_id)
                if (src is not None and src.role == "tool" and item.item_id not in wanted
                        and (self.dag.parent_key(src), src.call_id or src.node_id)
                        in slots):  # fmt: skip
                    # a newer version of this call is visible; a tool no version of
                    # which is on this chain came in with a merge peer and stays
                    removes.append(item.item_id)
        return [n for n in visible if n.node_id not in present], removes

    def recommit_head(self, info: EventInfo, session: SessionRow,
                      extra: Callable[[WorkingContext], None] | None = None,
                      head: str | None = None) -> None:  # fmt: skip
        head = head or session.head
        base_id = self.commit_at(session.session_id, head) if head is not None else None
        if head is None or base_id is None:
            return
        self._build(session, head, base_id, info, [], [], extra, [])

    def _build(self, session: SessionRow, head: str, base_id: str | None, info: EventInfo,
               new_nodes: list[NodeRow], removes: list[str],
               extra: Callable[[WorkingContext], None] | None,
               extra_parents: list[str]) -> None:  # fmt: skip
        policy = self.policy_at(info.notification_id)
        ctx = self.take(base_id, policy)
        base = self.commits.get(base_id) if base_id else None
        built = build(
            ctx, session=session, head=head,
            parent_ids=([base_id] if base_id else []) + extra_parents,
            base_checkpoint=(base.checkpoint_id, base.delta_count) if base else None,
            event=info, new_nodes=new_nodes, texts_of=self.texts_in(session.session_id),
            removes=removes,
            extra=extra,
        )  # fmt: skip
        row = built.row
        if session.tools:
            if session.tools_row is None:
                tools = dumps(session.tools)
                session.tools_row = (tools, tools_key(tools))
            tools, row["tools"] = session.tools_row
            self.outbox.tool_sets.setdefault(row["tools"], tools)
        self.pending[row["commit_id"]] = row
        self.outbox.commits.append(row)
        for transition in built.transitions:  # ordinals count within one event
            self.outbox.transitions.append(dict(transition, ordinal=self._ordinal))
            self._ordinal += 1
        self.commits[row["commit_id"]] = built.meta
        self.latest_commit[(session.session_id, head)] = row["commit_id"]
        if self.working is not None:
            self.held_commits.setdefault(session.session_id, set()).add(row["commit_id"])
        self._keep(row["commit_id"], built.ctx)


def tools_key(tools: str) -> str:
    """The key of a declared tool set: a digest of its canonical JSON."""
    return hashlib.sha256(tools.encode()).hexdigest()[:32]
