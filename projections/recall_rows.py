"""The row recall searches for a node: its original content, written with the node's row.

What a node said when it was appended never changes, whatever its item's
state becomes, so the row is written once, in the batch that writes the
node, and only an erasure removes it.  The text is the node's own text as
an item first shows it (``domain.node_text``), a tool's name and arguments
before its result, cut at ``RECALL_CHARS``: PostgreSQL refuses a
``tsvector`` over 1 MB, and a recalled hit is read by a model, not restored.
A node with no text (an attach, a merge) has no row.

The row itself keeps no copy of the text (revision 0014): ``recall_text``
computes it again from the node, for a hit's text and for the full-text
index's own bookkeeping (``projections.recall_index``).  So this text is a
contract: changing what it is for a stored node needs a revision that
re-indexes every row, or an erasure would remove other words than it indexed.
"""

from __future__ import annotations

import json
from typing import Any

from domain.node_text import node_texts as natural_texts
from domain.tool_specs import RECALL_SPEC
from projections.item_rows import node_texts
from projections.packed_text import unpack
from projections.records import NodeRow

RECALL_CHARS = 100_000
RECALL_NAME = str(RECALL_SPEC["name"])


def _text(role: str, name: str | None, rendered: str, call: str | None) -> str:
    if role == "tool" and name == RECALL_NAME:
        return ""  # recall's own answers are copies of what it found: searching them again
        # would rank the copies (cut short, the query's words in their header) above the originals
    parts = (name if role == "tool" else None, call, rendered)
    # PostgreSQL's text refuses NUL, which a tool's output (a binary file read) may hold
    return "\n".join(part for part in parts if part).replace("\x00", " ")[:RECALL_CHARS]


def _row(notification_id: int, session_id: str, node_id: str, seq: int, role: str,
         text: str) -> dict[str, Any] | None:  # fmt: skip
    if not text.strip():
        return None
    return {"notification_id": notification_id, "session_id": session_id, "node_id": node_id,
            "seq": seq, "role": role, "text": text}  # fmt: skip


def recall_row(node: NodeRow) -> dict[str, Any] | None:
    """``node``'s recall row (None: nothing to search), from the texts its items use."""
    natural = node_texts(node)
    text = _text(node.role, node.name, natural.rendered, natural.call)
    return _row(node.notification_id, node.session_id, node.node_id, node.seq, node.role, text)


def recall_text(node: NodeRow) -> str:
    """The text ``node``'s recall row stands for ("": it has none)."""
    row = recall_row(node)
    return str(row["text"]) if row is not None else ""


def stored_text(role: str, name: str | None, input: str | bytes, output: str | bytes) -> str:
    """The same text from a stored node row's columns, packed as ``ctx_nodes`` keeps them."""
    rendered, call = natural_texts(role, json.loads(unpack(input)), json.loads(unpack(output)))
    return _text(role, name, rendered, call)


def recall_row_of(notification_id: int, session_id: str, node_id: str, seq: int, role: str,
                  name: str | None, input: Any, output: Any) -> dict[str, Any] | None:  # fmt: skip
    """The same row from a stored node's columns (the migration's back-fill)."""
    rendered, call = natural_texts(role, input, output)
    return _row(notification_id, session_id, node_id, seq, role, _text(role, name, rendered, call))
