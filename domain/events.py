"""The event catalogue: every change to a session is one of these.

Events are immutable and append-only.  Each class carries ``class_version``
so its stored shape can evolve: bump the version and add an
``upcast_vN_vN+1`` static method that rewrites the stored state of the
previous version (see ``NodeAppended``).
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate

from domain.tenancy import DEFAULT_TENANT

JSON = dict[str, Any]


class SessionStarted(Aggregate.Created):
    """A new session (a branch names its source node).

    v2 added ``tenant`` (``domain.tenancy``): sessions stored before tenants
    existed belong to the default tenant.
    """

    class_version = 2

    title: str
    model: str
    branched_from: JSON | None
    context_window: int | None
    tenant: str

    @staticmethod
    def upcast_v1_v2(state: JSON) -> None:
        state.setdefault("tenant", DEFAULT_TENANT)


def _add_node(agg: Any, node_id: str, seq: int, role: str, parent: str | None, edge: str,
              slot: str, name: str | None, digest: str) -> None:  # fmt: skip
    agg.nodes[node_id] = {
        "seq": seq, "role": role, "parent": parent, "edge": edge,
        "slot": slot, "name": name, "digest": digest,
    }  # fmt: skip
    agg.next_seq = seq + 1
    agg.head = node_id


class NodeAppended(Aggregate.Event):
    """A message or tool call joined the DAG; HEAD moves to it.

    v2 added ``reads`` (nodes this one looked at, which keeps them from
    idle clearing) and ``digest``.  v3 added ``token_counts``: the local
    token estimate of the node's text, measured once when it was recorded
    (``domain.tokens.node_token_counts``), so projections read it rather
    than run the tokenizer again on every rebuild.
    """

    class_version = 3

    node_id: str
    seq: int
    role: str
    name: str | None
    input: Any
    output: Any
    predecessor: str | None
    caller: str | None
    call_id: str | None
    reads: list[str]
    metadata: JSON
    sibling_of: str | None
    version_kind: str | None
    digest: str
    token_counts: JSON | None

    @staticmethod
    def upcast_v1_v2(state: JSON) -> None:
        state.setdefault("reads", [])
        state.setdefault("digest", "")

    @staticmethod
    def upcast_v2_v3(state: JSON) -> None:
        state.setdefault("token_counts", None)  # not measured then: projections count

    @property
    def created_at(self) -> Any:
        return self.timestamp

    def apply(self, aggregate: Any) -> None:
        parent = self.caller or self.predecessor
        edge = "caller" if self.caller else ("predecessor" if self.predecessor else "root")
        _add_node(aggregate, self.node_id, self.seq, self.role, parent, edge,
                  self.call_id or "", self.name, self.digest)  # fmt: skip


class HeadMoved(Aggregate.Event):
    """Checkout: display-only, nothing is re-run or recomputed."""

    node_id: str
    previous: str | None

    def apply(self, aggregate: Any) -> None:
        aggregate.head = self.node_id


class AgentRunStarted(Aggregate.Event):
    run_id: str

    def apply(self, aggregate: Any) -> None:
        aggregate.running = self.run_id


class AgentRunFinished(Aggregate.Event):
    run_id: str
    status: str

    def apply(self, aggregate: Any) -> None:
        aggregate.running = None


class ModelSwitched(Aggregate.Event):
    model: str
    context_window: int | None

    def apply(self, aggregate: Any) -> None:
        aggregate.model = self.model
        aggregate.context_window = self.context_window


class NodePinned(Aggregate.Event):
    node_id: str

    def apply(self, aggregate: Any) -> None:
        aggregate.pinned.append(self.node_id)


class NodeUnpinned(Aggregate.Event):
    node_id: str

    def apply(self, aggregate: Any) -> None:
        aggregate.pinned.remove(self.node_id)


class AttachStaged(Aggregate.Event):
    """Another session's context staged after HEAD, as a DAG node of its own."""

    node_id: str
    seq: int
    predecessor: str | None
    source_session: str
    source_head: str
    commit: str | None

    def apply(self, aggregate: Any) -> None:
        edge = "predecessor" if self.predecessor else "root"
        _add_node(aggregate, self.node_id, self.seq, "attach", self.predecessor, edge,
                  "", None, f"attach:{self.source_session}:{self.source_head}")  # fmt: skip


class MergeStarted(Aggregate.Event):
    merge_id: str
    peers: list[JSON]
    base: JSON


class MergeCompleted(Aggregate.Event):
    """The merge node: the only kind of node whose commit has several parents."""

    merge_id: str
    node_id: str
    seq: int
    predecessor: str
    peers: list[JSON]
    base: JSON

    def apply(self, aggregate: Any) -> None:
        _add_node(aggregate, self.node_id, self.seq, "merge", self.predecessor,
                  "predecessor", "", None, f"merge:{self.merge_id}")  # fmt: skip


class UsageMeasured(Aggregate.Event):
    """What the provider reported for one request (never a sum over a turn).

    v2 keeps the provider's own usage object as given (``native``), says
    which convention read it (``domain.usage``), and adds ``cache_creation``;
    ``input_tokens`` is the prompt's part outside the cache for every
    provider, so ``total_input`` (the prompt the request occupied) is
    ``input_tokens + cache_read + cache_creation``.
    """

    class_version = 2

    request_id: str
    head_node: str
    input_tokens: int
    cache_read: int
    cache_creation: int
    output_tokens: int
    total_input: int
    convention: str
    native: JSON | None
    provider: str

    @staticmethod
    def upcast_v1_v2(state: JSON) -> None:
        # v1 had only ctxstore's flat fields, documented as input + cache read
        state.setdefault("cache_creation", 0)
        state.setdefault("total_input", state["input_tokens"] + state["cache_read"])
        state.setdefault("convention", "flat")
        state.setdefault("native", None)


class SummaryRecorded(Aggregate.Event):
    """An LLM's (or the extractive summarizer's) answer, frozen into the log."""

    summary_id: str
    covered: list[str]
    text: str
    summarizer: str
    commit: str


class CompactionConfigured(Aggregate.Event):
    """How this session's summaries are to be written, from the next compaction on.

    ``instructions`` go to the summarizer with every request (what to keep,
    in which language, ...); ``summarizer_model`` picks the model an LLM
    summarizer uses for this session.  ``None`` clears a setting.
    ``recall_tool`` lists the ``recall`` tool in this session's requests (true)
    or not (false) whatever the policy says; ``None`` follows the policy.
    Events recorded before it existed load with ``None``.
    """

    instructions: str | None
    summarizer_model: str | None
    recall_tool: bool | None = None

    def apply(self, aggregate: Any) -> None:
        aggregate.compaction = {"instructions": self.instructions,
                                "summarizer_model": self.summarizer_model,
                                "recall_tool": self.recall_tool}  # fmt: skip


class ToolsDeclared(Aggregate.Event):
    """The tools this session's requests offer the model, from now on.

    Each declaration replaces the last one (so re-declaring versions them);
    every request rendered after it lists exactly these, with their JSON
    schemas, and the budget counts them.
    """

    tools: list[JSON]
