"""Session commands that bring other context in or record what came back.

Attach, merge, usage and summaries are split out of ``session.py`` to keep
one concept per module; they validate against the same lean node index and
trigger events through the aggregate like every other command.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

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
from domain.limits import MAX_LABEL, check_id, check_json, check_label, check_node_id
from domain.session_part import SessionPart
from domain.usage import from_fields, from_native

JSON = dict[str, Any]
COMPACTION_SETTINGS = ("instructions", "summarizer_model", "recall_tool")
MAX_INSTRUCTIONS = 4_000  # characters: a prompt addendum, not a document
MAX_TOOLS = 128  # what providers take in one request
TOOL_KEYS = frozenset({"name", "description", "input_schema"})


class ContextCommands(SessionPart):
    """Mixed into ``Session`` (``SessionPart`` says what of it they use)."""

    def _new_node_id(self, node_id: str | None) -> str:
        """A fresh UUID, or the id an import names (checked like any node id)."""
        check_node_id(node_id)
        if node_id is not None and self.knows(node_id):
            raise errors.DuplicateNode(f"node {node_id!r} already exists", node_id=node_id)
        return node_id or str(uuid.uuid4())

    def stage_attach(
        self,
        source_session: str,
        source_head: str,
        commit: str | None,
        at: datetime | None = None,
        node_id: str | None = None,
    ) -> str:
        """Stage another branch's context as a node after HEAD (``node_id``: an import's)."""
        if source_session == str(self.id):
            raise errors.InvalidCommand("attach a different session; use merge within one")
        node_id = self._new_node_id(node_id)
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

    def merge(self, peers: list[JSON], at: datetime | None = None, merge_id: str | None = None,
              node_id: str | None = None) -> str:  # fmt: skip
        """Merge peer heads into HEAD; HEAD's own block is the locked base peer.

        ``merge_id`` and ``node_id`` are given only when an export is imported.
        """
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
        check_id("merge_id", merge_id)
        merge_id = merge_id or str(uuid.uuid4())
        node_id = self._new_node_id(node_id)
        base = {"session_id": str(self.id), "node_id": self.head}
        self.trigger_event(MergeStarted, merge_id=merge_id, peers=peers, base=base, timestamp=at)
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
        input_tokens: int | None = None,
        cache_read: int = 0,
        output_tokens: int = 0,
        provider: str | None = None,
        head_node: str | None = None,
        at: datetime | None = None,
        cache_creation: int = 0,
        usage: JSON | None = None,
    ) -> int:
        """Record one request's usage; the prompt's total tokens as measured.

        Either ``usage`` (the provider's usage object, as it came back) or
        ctxstore's flat fields (``input_tokens`` excluding both cache parts).
        """
        check_id("request_id", request_id, MAX_LABEL)
        check_id("provider", provider)
        head_node = head_node or self.head
        if head_node is None:
            raise errors.InvalidCommand("usage needs a head node")
        self.node(head_node)
        provider = provider or self.model.split(":", 1)[0]
        if usage is not None:
            if input_tokens is not None or cache_read or cache_creation or output_tokens:
                raise errors.InvalidCommand("give the provider's usage object or the flat "
                                            "token fields, not both")  # fmt: skip
            measured = from_native(usage, provider)
        elif input_tokens is None:
            raise errors.InvalidCommand("usage needs input_tokens or the provider's usage object")
        else:
            measured = from_fields(input_tokens, cache_read, cache_creation, output_tokens)
        self.trigger_event(
            UsageMeasured,
            request_id=request_id,
            head_node=head_node,
            input_tokens=measured.input_tokens,
            cache_read=measured.cache_read,
            cache_creation=measured.cache_creation,
            output_tokens=measured.output_tokens,
            total_input=measured.total_input,
            convention=measured.convention,
            native=dict(usage) if usage is not None else None,
            provider=provider,
            timestamp=at,
        )
        return measured.total_input

    def record_summary(
        self,
        covered: list[str],
        text: str,
        summarizer: str,
        commit: str,
        at: datetime | None = None,
        summary_id: str | None = None,
    ) -> str:
        if not covered:
            raise errors.InvalidCommand("a summary must cover at least one item")
        check_id("summary_id", summary_id, MAX_LABEL)
        summary_id = summary_id or f"summary:{uuid.uuid4()}"
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
        recall_tool: bool | None = None,
        only: Collection[str] | None = None,
    ) -> JSON:
        """Per-session summarizer instructions and model (each ``None`` to clear), and
        whether requests list ``recall`` (``None``: as the policy says).

        ``only`` names the settings this call changes; the others keep their value (a client
        turning the recall tool on should not have to resend, or lose, its instructions).
        ``None`` changes all three.  The event records all three as they then are, so a
        rebuild never needs to know which were named.  Returns those settings."""
        given: JSON = {"instructions": instructions, "summarizer_model": summarizer_model,
                       "recall_tool": recall_tool}  # fmt: skip
        if only is not None:
            unknown = sorted(set(only) - set(COMPACTION_SETTINGS))
            if unknown:
                raise errors.InvalidCommand(f"no compaction setting named {unknown[0]!r}")
            given = {k: v if k in only else self.compaction.get(k) for k, v in given.items()}
        check_label("instructions", given["instructions"], MAX_INSTRUCTIONS)
        if given["summarizer_model"] is not None:
            check_id("summarizer_model", given["summarizer_model"], MAX_LABEL)
        if given["recall_tool"] is not None and not isinstance(given["recall_tool"], bool):
            raise errors.InvalidCommand("recall_tool must be true, false or null")
        given["instructions"] = given["instructions"] or None
        self.trigger_event(CompactionConfigured, **given, timestamp=at)
        return given

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
