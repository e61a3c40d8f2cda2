"""In-memory index of every node: parents, tool calls, and what a head sees.

A head sees its parent chain plus, for each assistant on the chain, the tool
calls it made that are visible at the head: appended no later than the head
in its own session (or than the branch point in a source session), the
newest version of each call slot winning.

Node ids are unique only in their session, so the index keys a node by
``node_key(session, node id)``.  A node's events name other nodes by id
alone: its own session's nodes, or the session's branch point, which
belongs to the source (``owner``).  Items and queries name a node as the
session showing it sees it (``resolve``): its own nodes first, then the
source's up to the branch point, and so on up.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from projections.records import NodeRow, SessionRow, node_key


@dataclass
class DagIndex:
    """Nodes by key, by session and by caller; all of them, or a working set's.

    With a working set (``projections.working_set``) ``nodes`` and ``by_seq``
    load a session's rows on a miss, and ``counts`` still knows every
    session's node count without holding its nodes.
    """

    nodes: dict[str, NodeRow] = field(default_factory=dict)  # node key -> node
    tools_by_caller: dict[str, list[str]] = field(default_factory=dict)  # keys, by notification
    by_seq: dict[str, list[str]] = field(default_factory=dict)  # session -> node keys by seq
    sessions: dict[str, SessionRow] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # session -> nodes, held or not
    # branch point node key -> the sessions branched there (the only other
    # sessions that can hang tool calls off that node)
    branched_at: dict[str, list[str]] = field(default_factory=dict)

    def add_session(self, session: SessionRow) -> None:
        """A session row, new or changed (where it branched from never changes)."""
        known = session.session_id in self.sessions
        self.sessions[session.session_id] = session
        if not known and session.branched_from:
            point = self.ref(session.session_id, session.branched_from["node_id"])
            self.branched_at.setdefault(point, []).append(session.session_id)

    def owner(self, session_id: str, node_id: str) -> str:
        """The session holding the node ``session_id``'s events call ``node_id``.

        Its own, unless ``node_id`` is where it branched (a session never has
        a node of its own by that id): then the source's, and so on up.
        """
        sid = session_id
        for _ in range(len(self.sessions) + 1):  # a branch chain has no cycles
            session = self.sessions.get(sid)
            branched = session.branched_from if session is not None else None
            if not branched or branched["node_id"] != node_id:
                break
            sid = branched["session_id"]
        return sid

    def ref(self, session_id: str, node_id: str) -> str:
        """The key of the node ``session_id``'s events call ``node_id``."""
        return node_key(self.owner(session_id, node_id), node_id)

    def parent_key(self, node: NodeRow) -> str | None:
        return self.ref(node.session_id, node.parent) if node.parent is not None else None

    def resolve(self, session_id: str, node_id: str) -> NodeRow | None:
        """The node ``node_id`` names in what ``session_id`` shows, if any.

        Its own node, else its source's up to the branch point, and so on up.
        """
        sid, horizon = session_id, None
        for _ in range(len(self.sessions) + 1):
            node = self.nodes.get(node_key(sid, node_id))
            if node is not None and (horizon is None or node.seq <= horizon):
                return node
            session = self.sessions.get(sid)
            branched = session.branched_from if session is not None else None
            if not branched:
                return None
            sid = branched["session_id"]
            point = self.nodes.get(node_key(sid, branched["node_id"]))
            horizon = point.seq if point is not None else 0
        return None

    def find(self, session_id: str, ref: str) -> NodeRow | None:
        """``resolve``, or a node named by its key (another lineage's, as merges name them)."""
        node = self.resolve(session_id, ref)
        if node is None and "/" in ref and ref.split("/", 1)[0] in self.sessions:
            node = self.nodes.get(ref)
        return node

    def name_in(self, session_id: str, node: NodeRow) -> str:
        """How ``session_id`` names ``node``: its id if it shows it, else its key."""
        return node.node_id if self.resolve(session_id, node.node_id) is node else node.key

    def add(self, node: NodeRow) -> None:
        """A node new to the store."""
        self.index(node)
        self.counts[node.session_id] = self.counts.get(node.session_id, 0) + 1

    def index(self, node: NodeRow) -> None:
        """A node held in memory, new or loaded from its row."""
        key = node.key
        self.nodes[key] = node
        dict.setdefault(self.by_seq, node.session_id, []).append(key)
        if node.edge == "caller" and node.parent:
            # in the order the tools were appended, whichever session loaded first
            calls = self.tools_by_caller.setdefault(self.ref(node.session_id, node.parent), [])
            bisect.insort(calls, key, key=lambda i: dict.__getitem__(self.nodes, i).notification_id)

    def forget_session(self, session_id: str) -> None:
        """Let a session's nodes go (a working set evicting it); its count stays."""
        for key in dict.pop(self.by_seq, session_id, []):
            node = dict.pop(self.nodes, key)
            if node.edge == "caller" and node.parent:
                caller = self.ref(node.session_id, node.parent)
                calls = self.tools_by_caller.get(caller, [])
                calls.remove(key)
                if not calls:
                    del self.tools_by_caller[caller]

    def previous(self, node: NodeRow) -> NodeRow | None:
        """The node appended just before ``node`` in its session (or the branch point)."""
        ids = self.by_seq.get(node.session_id, [])
        index = node.seq - 2
        if 0 <= index < len(ids):
            return self.nodes[ids[index]]
        if index == -1:
            branched = self.sessions[node.session_id].branched_from
            if branched:
                return self.nodes.get(self.ref(node.session_id, branched["node_id"]))
        return None

    def depth(self, session_id: str) -> int:
        depth = 0
        session = self.sessions.get(session_id)
        while session is not None and session.branched_from:
            depth += 1
            session = self.sessions.get(session.branched_from["session_id"])
        return depth

    def chain(self, key: str) -> list[NodeRow]:
        """The node keyed ``key`` and its ancestors, root first."""
        out: list[NodeRow] = []
        seen: set[str] = set()
        cursor: str | None = key
        while cursor is not None and cursor in self.nodes and cursor not in seen:
            seen.add(cursor)
            node = self.nodes[cursor]
            out.append(node)
            cursor = self.parent_key(node)
        out.reverse()
        return out

    def visible(self, head: NodeRow) -> list[NodeRow]:
        """Every node whose item belongs under ``head``, in chronological order."""
        chain = self.chain(head.key)
        horizon: dict[str, int] = {}
        for node in chain:
            horizon[node.session_id] = max(horizon.get(node.session_id, 0), node.seq)
        horizon[head.session_id] = head.seq
        chosen: dict[str, NodeRow] = {n.key: n for n in chain}
        on_chain = set(chosen)
        for node in chain:
            if node.role != "assistant":
                continue
            winners: dict[str, NodeRow] = {}
            for tool_key in self.tools_by_caller.get(node.key, []):
                tool = self.nodes[tool_key]
                if tool.seq > horizon.get(tool.session_id, -1):
                    continue
                slot = tool.call_id or tool.node_id
                current = winners.get(slot)
                if current is not None and current.key in on_chain:
                    continue  # the version the chain runs through always wins
                if current is None or tool_key in on_chain or self._later(tool, current):
                    winners[slot] = tool
            for tool in winners.values():
                chosen[tool.key] = tool
        return sorted(chosen.values(), key=lambda n: (self.depth(n.session_id), n.seq))

    def _later(self, a: NodeRow, b: NodeRow) -> bool:
        return (self.depth(a.session_id), a.seq) > (self.depth(b.session_id), b.seq)
