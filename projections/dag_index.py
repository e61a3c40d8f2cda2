"""In-memory index of every node: parents, tool calls, and what a head sees.

A head sees its parent chain plus, for each assistant on the chain, the tool
calls it made that are visible at the head: appended no later than the head
in its own session (or than the branch point in a source session), the
newest version of each call slot winning.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from projections.records import NodeRow, SessionRow


@dataclass
class DagIndex:
    """Nodes by id, by session and by caller; all of them, or a working set's.

    With a working set (``projections.working_set``) ``nodes`` and ``by_seq``
    load a session's rows on a miss, and ``counts`` still knows every
    session's node count without holding its nodes.
    """

    nodes: dict[str, NodeRow] = field(default_factory=dict)
    tools_by_caller: dict[str, list[str]] = field(default_factory=dict)  # by notification id
    by_seq: dict[str, list[str]] = field(default_factory=dict)  # session -> node ids by seq
    sessions: dict[str, SessionRow] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # session -> nodes, held or not

    def add(self, node: NodeRow) -> None:
        """A node new to the store."""
        self.index(node)
        self.counts[node.session_id] = self.counts.get(node.session_id, 0) + 1

    def index(self, node: NodeRow) -> None:
        """A node held in memory, new or loaded from its row."""
        self.nodes[node.node_id] = node
        dict.setdefault(self.by_seq, node.session_id, []).append(node.node_id)
        if node.edge == "caller" and node.parent:
            # in the order the tools were appended, whichever session loaded first
            calls = self.tools_by_caller.setdefault(node.parent, [])
            bisect.insort(calls, node.node_id,
                          key=lambda i: self.nodes[i].notification_id)  # fmt: skip

    def forget_session(self, session_id: str) -> None:
        """Let a session's nodes go (a working set evicting it); its count stays."""
        for node_id in dict.pop(self.by_seq, session_id, []):
            node = dict.pop(self.nodes, node_id)
            if node.edge == "caller" and node.parent:
                calls = self.tools_by_caller.get(node.parent, [])
                calls.remove(node_id)
                if not calls:
                    del self.tools_by_caller[node.parent]

    def previous(self, node: NodeRow) -> NodeRow | None:
        """The node appended just before ``node`` in its session (or the branch point)."""
        ids = self.by_seq.get(node.session_id, [])
        index = node.seq - 2
        if 0 <= index < len(ids):
            return self.nodes[ids[index]]
        if index == -1:
            branched = self.sessions[node.session_id].branched_from
            if branched:
                return self.nodes.get(branched["node_id"])
        return None

    def depth(self, session_id: str) -> int:
        depth = 0
        session = self.sessions.get(session_id)
        while session is not None and session.branched_from:
            depth += 1
            session = self.sessions.get(session.branched_from["session_id"])
        return depth

    def chain(self, node_id: str) -> list[NodeRow]:
        out: list[NodeRow] = []
        seen: set[str] = set()
        cursor: str | None = node_id
        while cursor is not None and cursor in self.nodes and cursor not in seen:
            seen.add(cursor)
            node = self.nodes[cursor]
            out.append(node)
            cursor = node.parent
        out.reverse()
        return out

    def visible(self, head: NodeRow) -> list[NodeRow]:
        """Every node whose item belongs under ``head``, in chronological order."""
        chain = self.chain(head.node_id)
        horizon: dict[str, int] = {}
        for node in chain:
            horizon[node.session_id] = max(horizon.get(node.session_id, 0), node.seq)
        horizon[head.session_id] = head.seq
        chosen: dict[str, NodeRow] = {n.node_id: n for n in chain}
        on_chain = {n.node_id for n in chain}
        for node in chain:
            if node.role != "assistant":
                continue
            winners: dict[str, NodeRow] = {}
            for tool_id in self.tools_by_caller.get(node.node_id, []):
                tool = self.nodes[tool_id]
                if tool.seq > horizon.get(tool.session_id, -1):
                    continue
                slot = tool.call_id or tool.node_id
                current = winners.get(slot)
                if current is not None and current.node_id in on_chain:
                    continue  # the version the chain runs through always wins
                if current is None or tool.node_id in on_chain or self._later(tool, current):
                    winners[slot] = tool
            for tool in winners.values():
                chosen[tool.node_id] = tool
        return sorted(chosen.values(), key=lambda n: (self.depth(n.session_id), n.seq))

    def _later(self, a: NodeRow, b: NodeRow) -> bool:
        return (self.depth(a.session_id), a.seq) > (self.depth(b.session_id), b.seq)
