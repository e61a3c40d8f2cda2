"""ContextCommit items: what the model is fed under a head, with reasons.

An item is the projection of one node (or a summary, or an attach marker).
``state`` only ever tightens along ``STATE_ORDER``; summaries are their own
state and exist only in projections, never as nodes.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

STATE_ORDER = {"full": 0, "aged": 1, "cleared": 2, "summarized": 3}
STATES = ("full", "aged", "cleared", "summarized", "summary")
ORD_STEP = 1024  # gaps between item positions so a summary can sit before its run


def tightens(before: str, after: str) -> bool:
    """True when ``after`` is the same as or tighter than ``before``.

    A summary is its own state; the only way on from it is to be folded into a
    higher-level summary (``summarized``), as any other item is.
    """
    if before == "summary":
        return after in ("summary", "summarized")
    if after == "summary":
        return False
    return STATE_ORDER[after] >= STATE_ORDER[before]


class Natural(NamedTuple):
    """What an item of a node shows as it first appears: the node's own content."""

    rendered: str
    call: str | None
    blocks: list[dict[str, Any]] | None
    call_id: str | None


@dataclass(slots=True)
class Item:
    item_id: str
    source_node_id: str | None
    role: str  # user | assistant | tool | system | summary | marker
    state: str
    rendered: str  # message text, or a tool's result as the model sees it
    tokens: int
    ord: int
    touched_at: float  # epoch seconds; the idle clock restarts when a node reads it
    name: str | None = None
    call: str | None = None  # a tool's arguments as the model sees them
    has_result: bool = True
    is_error: bool = False
    locked: bool = False
    base_locked: bool = False  # locked for good: the base peer's block of a merge
    reason: str | None = None
    merged_into: str | None = None
    is_anchor: bool = False
    attached_from: str | None = None
    truncated: bool = False
    level: int = 0  # a summary's height: 1 over raw items, one more over each summary it folds
    dedup_of: str | None = None  # rendered as a reference to this earlier, equal result
    blocks: list[dict[str, Any]] | None = None  # content blocks rendered instead of the text
    call_id: str | None = None  # a tool call's id as the model gave it
    # Gemini's ``thoughtSignature`` for this tool call, from the node's metadata;
    # only the ``gemini`` shape sends it back (on the call's ``functionCall`` part).
    call_signature: str | None = None

    # Every field is a scalar, so no deep copy is needed: ``asdict`` would
    # make one per call, and copies and JSON sit on the projection's hot path.
    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ITEM_FIELDS}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Item:
        return cls(**raw)

    def copy(self) -> Item:
        return Item(*_item_values(self))


ITEM_FIELDS = tuple(f.name for f in fields(Item))
_item_values = operator.attrgetter(*ITEM_FIELDS)


@dataclass(frozen=True, slots=True)
class Transition:
    """One audit row: which rule changed which item, and the measured inputs."""

    item_id: str
    source_node_id: str | None
    from_state: str
    to_state: str
    rule: str
    inputs: str


@dataclass(frozen=True)
class ContextCommit:
    """An immutable snapshot of what the model is fed under ``head_node_id``."""

    id: str
    session_id: str
    parent_ids: tuple[str, ...]
    head_node_id: str
    rules_version: str
    total_tokens: int
    event_id: str
    event_seq: int
    created_at: float
    items: tuple[Item, ...]
    summary_request: dict[str, Any] | None = None
    tools: tuple[dict[str, Any], ...] = ()  # the tools the session had declared then

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "parent_ids": list(self.parent_ids),
            "head_node_id": self.head_node_id,
            "rules_version": self.rules_version,
            "total_tokens": self.total_tokens,
            "event_id": self.event_id,
            "event_seq": self.event_seq,
            "created_at": self.created_at,
            "summary_request": self.summary_request,
            "tools": list(self.tools),
            "items": [item.to_json() for item in self.items],
        }
