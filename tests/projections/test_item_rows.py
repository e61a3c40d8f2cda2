"""Stored items refer to their node's text: lossless, and the text is stored once."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from domain.context import Item
from domain.rules.truncation import cut_middle
from projections import item_rows
from projections import tables as t
from projections.item_rows import SPLICE_MIN, SPLICED, loaded_item, node_texts, stored_item
from projections.migrate import downgrade, upgrade
from projections.packed_text import unpack
from projections.rebuild import digest, rebuild_and_compare
from projections.records import NodeRow
from service.runtime import Runtime

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
ROLES = ("user", "assistant", "tool", "system", "summary", "marker")
texts = st.text(max_size=40)


def node(role: str, input: object, output: object) -> NodeRow:
    return NodeRow("n1", "s", 1, role, "grep", input, output, None, "root", None, [], {},
                   None, None, 0.0, "e", 1)  # fmt: skip


@given(
    role=st.sampled_from(ROLES[:4]),
    input=st.one_of(st.none(), texts, st.dictionaries(texts, texts, max_size=3)),
    output=st.one_of(st.none(), texts, st.dictionaries(texts, st.integers(), max_size=3),
                     st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts),
                              min_size=1, max_size=2)),
    rewrite=st.one_of(st.none(), texts),
    call=st.one_of(st.none(), texts),
    keep_call=st.booleans(),
    flags=st.fixed_dictionaries({
        "locked": st.booleans(), "has_result": st.booleans(), "truncated": st.booleans(),
        "reason": st.one_of(st.none(), texts), "merged_into": st.one_of(st.none(), texts),
        "attached_from": st.one_of(st.none(), texts), "name": st.one_of(st.none(), texts),
    }),
)  # fmt: skip
def test_a_stored_item_loads_back_equal(
    role: str, input: object, output: object, rewrite: str | None, call: str | None,
    keep_call: bool, flags: dict[str, Any],
) -> None:  # fmt: skip
    source = node(role, input, output)
    natural = node_texts(source)
    own = rewrite is None
    item = Item("n1", "n1", role, "full", natural.rendered if own else rewrite, 3, 1024,
                0.0, call=natural.call if keep_call else call,
                blocks=natural.blocks if own else None, call_id=natural.call_id,
                **flags)  # fmt: skip
    raw = stored_item(item, lambda _: node_texts(source))
    assert ("rendered" in raw) == (item.rendered != natural.rendered)
    assert ("call" in raw) == (item.call != natural.call)
    assert ("blocks" in raw) == (item.blocks != natural.blocks)
    assert loaded_item(raw, lambda _: source) == item


def test_items_without_a_node_keep_their_own_text() -> None:
    summary = Item("s1", None, "summary", "summary", "[Summary] x", 5, 1023, 0.0,
                   reason="summary of 2 items")  # fmt: skip
    raw = stored_item(summary, lambda _: None)
    assert raw["rendered"] == "[Summary] x" and raw["call"] is None
    assert "blocks" not in raw and "call_id" not in raw
    assert "locked" not in raw, "fields at their defaults are left out"
    assert loaded_item(raw, lambda _: None) == summary


def test_a_tool_result_is_stored_in_its_node_row_only(rt: Runtime) -> None:
    """Fresh, aged-then-summarized or not: commit rows hold no copy of the node's text."""
    result = "unique result line\n" * 50
    sid, _ = rt.execute("start_session", "t", at=T0)
    rt.execute("append_node", sid, role="user", input="go", at=T0)
    for turn in range(6):  # the tool ages once three more turns pass it
        rt.execute("append_node", sid, role="assistant", output=f"turn {turn}", at=T0)
        if turn == 0:
            rt.execute("append_node", sid, role="tool", name="grep", input={"q": "x"},
                       output=result, at=T0 + timedelta(minutes=1))  # fmt: skip
    with rt.store.engine.connect() as conn:  # as the rows read (a large one is compressed)
        stored = [unpack(r[0]) for r in conn.execute(select(t.commits.c["items"]))]
        outputs = [unpack(r[0]) for r in conn.execute(select(t.nodes.c.output))]
    copy = "unique result line\\nunique result line"  # the text as JSON stores it
    assert len(stored) == 8
    assert not any(copy in row for row in stored)
    assert sum(copy in row for row in outputs) == 1
    # ... and every commit still reads back with the full text until aging stubs it.
    states = [
        next(i for i in rt.commit(sid, c["commit_id"])["items"] if i["role"] == "tool")
        for c in rt.timeline(sid)[3:]
    ]
    assert states[0]["rendered"] == result and states[0]["state"] == "full"
    assert states[-1]["state"] == "aged" and states[-1]["rendered"].startswith("[tool result")


def test_the_format_migration_clears_projections_for_a_rebuild(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False)
    try:
        sid, _ = rt.execute("start_session", "t", at=T0)
        rt.execute("append_node", sid, role="user", input="hello", at=T0)
        rt.execute("append_node", sid, role="assistant", output="hi", at=T0)
        before = rt.head_commit(sid)
    finally:
        rt.close()
    head, _ = migrated_from(store_url, "0001", sid)
    assert head == before


def migrated_from(store_url: str, revision: str, sid: str) -> tuple[dict[str, Any], Any]:
    """Down to ``revision``, up to head, which must leave the projections empty for the
    log to be replayed: then the head commit and the digest the replay made."""
    downgrade(store_url, revision)
    upgrade(store_url)
    again = Runtime(store_url, auto_compact=False, auto_catch_up=False, migrate=False)
    try:
        assert again.store.position() == 0, "projections cleared: the log is replayed"
        again.catch_up()
        return again.head_commit(sid), digest(again.store)
    finally:
        again.close()


@given(
    source=st.text(alphabet="ab\n", max_size=300),
    cap=st.integers(min_value=1, max_value=300),
    cut=st.tuples(st.integers(0, 300), st.integers(0, 300)),
    middle=st.text(alphabet="abc", max_size=40),
)
def test_a_rewrite_that_keeps_the_nodes_text_is_stored_as_a_splice(
    source: str, cap: int, cut: tuple[int, int], middle: str
) -> None:
    """A capped result (both ends of its node's text) and any other rewrite: a splice
    only when it spares enough, and it always loads back the very text."""
    node_row = node("tool", {"q": 1}, source)
    natural = node_texts(node_row)
    for rewrite in (cut_middle(natural.rendered, cap)[0],
                    natural.rendered[: cut[0]] + middle + natural.rendered[cut[1] :]):  # fmt: skip
        item = Item("n1", "n1", "tool", "full", rewrite, 3, 1024, 0.0, call=natural.call,
                    call_id=natural.call_id, truncated=True)  # fmt: skip
        raw = stored_item(item, lambda _: natural)
        if rewrite == natural.rendered:
            assert "rendered" not in raw and SPLICED not in raw
        elif SPLICED in raw:
            head, tail, kept = raw[SPLICED]
            assert head + tail >= SPLICE_MIN and "rendered" not in raw
            assert len(json.dumps(raw[SPLICED])) < len(json.dumps(rewrite))
        else:
            assert raw["rendered"] == rewrite
        assert loaded_item(raw, lambda _: node_row) == item


def test_a_capped_result_is_stored_once_and_reads_back_whole(rt: Runtime, store_url: str) -> None:
    """The cap keeps both ends of a large result: the commit rows splice the node's text."""
    result = "".join(f"line {i}: {'x' * (i % 7)}\n" for i in range(4000))
    sid, _ = rt.execute("start_session", "t", at=T0)
    rt.execute("append_node", sid, role="user", input="go", at=T0)
    rt.execute("append_node", sid, role="assistant", output="reading", at=T0)
    rt.execute("append_node", sid, role="tool", name="cat", input={"path": "big.log"},
               output=result, at=T0)  # fmt: skip
    tool = next(i for i in rt.head_commit(sid)["items"] if i["role"] == "tool")
    assert tool["truncated"] and tool["rendered"].startswith("line 0:")
    assert tool["rendered"].endswith("line 3999: xx\n")
    with rt.store.engine.connect() as conn:
        stored = [unpack(r[0]) for r in conn.execute(select(t.commits.c["items"]))]
    assert not any("line 3999" in row for row in stored), "no copy of either end"
    assert any(f'"{SPLICED}"' in row for row in stored)
    assert rebuild_and_compare(store_url)["identical"]


def test_an_upgraded_store_is_rebuilt_in_the_spliced_form(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows an older version wrote (capped texts in full) would not digest equal to a
    rebuild: revision 0015 empties the projections, and the log is projected again."""
    monkeypatch.setattr(item_rows, "SPLICE_MIN", 10**9)  # as code before revision 0015 wrote
    rt = Runtime(store_url, auto_compact=False)
    try:
        sid, _ = rt.execute("start_session", "t", at=T0)
        rt.execute("append_node", sid, role="user", input="go", at=T0)
        rt.execute("append_node", sid, role="assistant", output="reading", at=T0)
        rt.execute("append_node", sid, role="tool", name="cat", output="y\n" * 60_000, at=T0)
        before, old = rt.head_commit(sid), digest(rt.store)
    finally:
        rt.close()
    monkeypatch.undo()
    head, replayed = migrated_from(store_url, "0014", sid)
    assert head == before
    assert replayed["ctx_commits"] != old["ctx_commits"], "the old rows: not what a rebuild writes"
    assert rebuild_and_compare(store_url)["identical"]
