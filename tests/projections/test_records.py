"""A node read back from its row is the node that was written, decoded only when read."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from projections import tables as t
from projections.item_rows import node_call, node_texts
from projections.packed_text import stored
from projections.records import NodeRow, StoredNodeRow, parent_ids_of

texts = st.text(max_size=300)
values = st.one_of(
    st.none(), texts, st.dictionaries(texts, st.one_of(texts, st.integers()), max_size=4),
    st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), min_size=1, max_size=2),
    st.lists(st.integers(), max_size=3),
)  # fmt: skip


def node(role: str, input: Any, output: Any, counts: dict[str, int] | None) -> NodeRow:
    return NodeRow("n1", "s", 1, role, "grep", input, output, None, "root", "c1", ["r"], {},
                   None, None, 0.0, "e", 1, counts)  # fmt: skip


def fields_of(row: NodeRow) -> dict[str, Any]:
    return {f.name: getattr(row, f.name) for f in fields(row) if f.compare}


def read_back(original: NodeRow, sqlite: bool) -> NodeRow:
    """As the working set reads it: the row ``to_row`` wrote, as each store keeps it."""
    row = original.to_row()
    if sqlite:  # SQLite keeps a packed text as its zlib stream
        row = {k: stored(v) for k, v in row.items()}
    assert list(row) == [c.name for c in t.nodes.columns], "the table's column order"
    return NodeRow.from_row(tuple(row.values()))


@given(role=st.sampled_from(["user", "assistant", "tool", "system"]), input=values,
       output=values, counts=st.one_of(st.none(), st.just({"cl100k_base": 7})),
       sqlite=st.booleans())  # fmt: skip
def test_a_stored_row_reads_back_the_node(
    role: str, input: Any, output: Any, counts: dict[str, int] | None, sqlite: bool
) -> None:
    original = node(role, input, output, counts)
    loaded = read_back(original, sqlite)
    assert isinstance(loaded, StoredNodeRow)
    assert node_call(loaded) == node_texts(original).call, "a tool's call, from the stored text"
    assert fields_of(loaded) == fields_of(original)  # every field, decoded on the way
    assert node_texts(loaded) == node_texts(original)


def test_a_stub_needs_nothing_of_the_content() -> None:
    """Reading a node's call leaves its (large) output undecoded."""
    original = node("tool", {"path": "a.py"}, "x" * 10_000, None)
    loaded = read_back(original, sqlite=True)
    assert node_call(loaded) == '{"path":"a.py"}'
    assert type(loaded.__dict__["output"]).__name__ == "_Stored", "not decoded"
    assert loaded.output == "x" * 10_000
    assert loaded.__dict__["output"] == "x" * 10_000, "decoded once, then kept"


hex_ids = st.from_regex(r"[0-9a-f]{32}", fullmatch=True)


@given(parents=st.lists(st.one_of(st.text(max_size=40), hex_ids), max_size=3))
def test_parent_ids_read_as_json_reads_them(parents: list[str]) -> None:
    """The single-parent shortcut (``parent_ids_of``) answers what the parser would, for any
    list of strings as the commits table stores it, quotes and escapes included."""
    for text in (json.dumps(parents), json.dumps(parents, ensure_ascii=False)):
        assert parent_ids_of(text) == json.loads(text) == parents
