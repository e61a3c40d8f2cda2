"""The aggregate's lean view of a node: enough to validate edges, no content."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROLES = frozenset({"user", "assistant", "tool", "system"})
CONVERSATION_ROLES = frozenset({"user", "assistant", "system"})
# Nodes that are not messages but DAG positions created by attach and merge.
STRUCTURAL_ROLES = frozenset({"attach", "merge"})


@dataclass(frozen=True)
class NodeRef:
    node_id: str
    seq: int
    role: str
    parent: str | None
    edge: str  # "predecessor" | "caller" | "root"
    slot: str  # tool nodes: their call id; others: "" (all conversation children share a slot)
    name: str | None
    digest: str
    external: bool = False

    @classmethod
    def from_json(cls, node_id: str, raw: dict[str, Any]) -> NodeRef:
        return cls(
            node_id=node_id,
            seq=raw["seq"],
            role=raw["role"],
            parent=raw["parent"],
            edge=raw["edge"],
            slot=raw["slot"],
            name=raw.get("name"),
            digest=raw.get("digest", ""),
        )

    @classmethod
    def branch_point(cls, node_id: str, role: str) -> NodeRef:
        """The branch point of a branched session: known, but owned by the source."""
        return cls(node_id, 0, role, None, "root", "", None, "", external=True)
