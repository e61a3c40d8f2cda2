"""Session commands that bring other context in or record what came back.

Attach, merge, usage and summaries are split out of ``session.py`` to keep
one concept per module; they validate against the same lean node index and
trigger events through the aggregate like every other command.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from domain import errors
from domain.call_ids import valid_tool_name
from domain.events import (
    AttachStaged,
    CompactionConfigured,
    MergeCompleted,
    MergeStarted,
    SummaryRecorded,
    ToolsDeclared,
    UsageMeasured,
)
from domain.limits import MAX_LABEL, check_count, check_id, check_json, check_label
from domain.nodes import NodeRef

JSON = dict[str, Any]
MAX_INSTRUCTIONS = 4_000  # characters: a prompt addendum, not a document
MAX_TOOLS = 128  # what providers take in one request
TOOL_KEYS = frozenset({"name", "description", "input_schema"})


class ContextCommands:
    """Mixed into ``Session``; relies on its node index, HEAD and trigger_event."""

    id: Any
    head: str | None
    model: str
    next_seq: int

    if TYPE_CHECKING:  # provided by Session; declared here for the type checker only

        def node(self, node_id: str) -> NodeRef: ...
        def knows(self, node_id: str) -> bool: ...
        def trigger_event(self, event_class: Any, **kwargs: Any) -> None: ...
        def _refuse_while_running(self, what: str) -> None: ...

    def stage_attach(
        self,
        source_session: str,
        source_head: str,
        commit: str | None,
        at: datetime | None = None,
    ) -> str:
        """Stage another branch's context as a node after HEAD."""
        if source_session == str(self.id):
            raise errors.InvalidCommand("attach a different session; use merge within one")
        node_id = str(uuid.uuid4())
        self.trigger_event(
            AttachStaged,
            node_id=node_id,
            seq=self.next_seq,
            predecessor=self.head,
            source_session=source_session,
            source_head=source_head,
            commit=commit,
            timestamp=at,
        )
        return node_id

    def merge(self, peers: list[JSON], at: datetime | None = None) -> str:
        """Merge peer heads into HEAD; HEAD's own block is the locked base peer."""
        self._refuse_while_running("merge")
        if self.head is None:
            raise errors.MergeRefused("nothing to merge into: the session is empty")
        if not peers:
            raise errors.MergeRefused("merge needs at least one peer head")
        named = [(peer["session_id"], peer["node_id"]) for peer in peers]
        if len(set(named)) != len(named):
            raise errors.MergeRefused("a peer head is named twice")
        for peer in peers:
            if peer["session_id"] == str(self.id) and not self.knows(peer["node_id"]):
                raise errors.NodeNotFound("unknown peer head", node_id=peer["node_id"])
            if peer["session_id"] == str(self.id) and peer["node_id"] == self.head:
                raise errors.MergeRefused("a head cannot merge with itself")
        merge_id = str(uuid.uuid4())
        base = {"session_id": str(self.id), "node_id": self.head}
        self.trigger_event(MergeStarted, merge_id=merge_id, peers=peers, base=base, timestamp=at)
        node_id = str(uuid.uuid4())
        self.trigger_event(
            MergeCompleted,
            merge_id=merge_id,
            node_id=node_id,
            seq=self.next_seq,
            predecessor=self.head,
            peers=peers,
            base=base,
            timestamp=at,
        )
        return node_id

    def measure_usage(
        self,
        request_id: str,
        input_tokens: int,
        cache_read: int = 0,
        output_tokens: int = 0,
        provider: str | None = None,
        head_node: str | None = None,
        at: datetime | None = None,
    ) -> None:
        check_id("request_id", request_id, MAX_LABEL)
        check_id("provider", provider)
        head_node = head_node or self.head
        if head_node is None:
            raise errors.InvalidCommand("usage needs a head node")
        self.node(head_node)
        check_count("input_tokens", input_tokens)
        check_count("cache_read", cache_read)
        check_count("output_tokens", output_tokens)
        self.trigger_event(
            UsageMeasured,
            request_id=request_id,
            head_node=head_node,
            input_tokens=input_tokens,
            cache_read=cache_read,
            output_tokens=output_tokens,
            provider=provider or self.model.split(":", 1)[0],
            timestamp=at,
        )

    def record_summary(
        self,
        covered: list[str],
        text: str,
        summarizer: str,
        commit: str,
        at: datetime | None = None,
    ) -> str:
        if not covered:
            raise errors.InvalidCommand("a summary must cover at least one item")
        summary_id = f"summary:{uuid.uuid4()}"
        self.trigger_event(
            SummaryRecorded,
            summary_id=summary_id,
            covered=list(covered),
            text=text,
            summarizer=summarizer,
            commit=commit,
            timestamp=at,
        )
        return summary_id

    def configure_compaction(
        self,
        instructions: str | None = None,
        summarizer_model: str | None = None,
        at: datetime | None = None,
    ) -> None:
        """Per-session summarizer instructions and model (each ``None`` to clear)."""
        check_label("instructions", instructions, MAX_INSTRUCTIONS)
        if summarizer_model is not None:
            check_id("summarizer_model", summarizer_model, MAX_LABEL)
        self.trigger_event(CompactionConfigured, instructions=instructions or None,
                           summarizer_model=summarizer_model, timestamp=at)  # fmt: skip

    def declare_tools(self, tools: list[JSON], at: datetime | None = None) -> None:
        """The tools requests offer from now on: name, description, JSON schema each."""
        if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
            raise errors.InvalidCommand(f"tools must be a list of at most {MAX_TOOLS} tools")
        names: set[str] = set()
        for n, tool in enumerate(tools):
            where = f"tools[{n}]"
            if not isinstance(tool, dict) or set(tool) - TOOL_KEYS or "name" not in tool:
                raise errors.InvalidCommand(
                    f"{where} must be an object with 'name' and optional "
                    "'description' and 'input_schema'",
                    field=where,
                )
            name = tool["name"]
            if not isinstance(name, str) or not valid_tool_name(name):
                raise errors.InvalidCommand(
                    f"{where}.name must match [A-Za-z0-9_-]{{1,64}}, as providers require",
                    field=where,
                )
            if name in names:
                raise errors.InvalidCommand(f"tool {name!r} is declared twice", field=where)
            names.add(name)
            check_label(f"{where}.description", tool.get("description"))
            schema = tool.get("input_schema", {"type": "object"})
            if not isinstance(schema, dict) or schema.get("type") != "object":
                raise errors.InvalidCommand(
                    f"{where}.input_schema must be a JSON schema of type 'object'", field=where
                )
            check_json(f"{where}.input_schema", schema)
        self.trigger_event(ToolsDeclared, tools=[dict(t) for t in tools], timestamp=at)
