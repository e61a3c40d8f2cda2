"""Large JSON columns are stored compressed; rows and events written before read the same.

A store written before this version holds node texts, commit items and
event states uncompressed: after an upgrade they must read as they did, and
a rebuild (which writes them compressed) must equal what is served.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

from domain.state_compressor import MAGIC, StateCompressor
from projections import tables as t
from projections.packed_text import PACK_AT, PREFIX, pack, stored, unpack
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.conftest import immediate_policy

RESULT = "    for key, value in items.items():\n        print(key, value)\n" * 300


def test_a_large_text_is_packed_and_a_small_one_kept() -> None:
    big = json.dumps(RESULT)
    assert pack(big).startswith(PREFIX) and len(pack(big)) < len(big) // 3
    assert unpack(pack(big)) == big
    blob = stored(pack(big))  # as SQLite keeps it
    assert isinstance(blob, bytes) and blob.startswith(MAGIC) and len(blob) < len(pack(big))
    assert unpack(blob) == big and stored(big) == big
    small = json.dumps("x" * (PACK_AT - 10))
    assert pack(small) == small == unpack(small)


@given(st.recursive(st.none() | st.integers() | st.text(), lambda inner: st.lists(inner)
                    | st.dictionaries(st.text(), inner), max_leaves=40))  # fmt: skip
def test_any_json_round_trips_and_never_looks_packed(value: Any) -> None:
    encoded = json.dumps(value)
    assert not encoded.startswith(PREFIX)
    assert unpack(pack(encoded)) == encoded


def _events_table(rt: Runtime) -> str:
    recorder: Any = rt.app.recorder
    return str(recorder.events_table_name)


def _unpacked_everywhere(rt: Runtime) -> None:
    """Rewrite the store as an older version wrote it: nothing compressed."""
    with rt.store.engine.begin() as conn:
        for row in conn.execute(text("SELECT node_id, session_id, input, output FROM ctx_nodes")):
            conn.execute(text("UPDATE ctx_nodes SET input = :i, output = :o WHERE node_id = :n "
                              "AND session_id = :s"),
                         {"i": unpack(row.input), "o": unpack(row.output), "n": row.node_id,
                          "s": row.session_id})  # fmt: skip
        for row in conn.execute(text("SELECT commit_id, items FROM ctx_commits")):
            conn.execute(text("UPDATE ctx_commits SET items = :i WHERE commit_id = :c"),
                         {"i": unpack(row.items), "c": row.commit_id})  # fmt: skip
        table = _events_table(rt)
        for row in conn.execute(text(f"SELECT originator_id, originator_version, state "
                                     f"FROM {table}")):  # fmt: skip
            conn.execute(text(f"UPDATE {table} SET state = :st WHERE originator_id = :o "
                              "AND originator_version = :v"),
                         {"st": StateCompressor().decompress(bytes(row.state)),
                          "o": row.originator_id, "v": row.originator_version})  # fmt: skip


def _packed(value: Any) -> bool:
    """Stored compressed: base64 text on PostgreSQL, the zlib stream itself on SQLite."""
    if isinstance(value, bytes):
        return value.startswith(MAGIC)
    return str(value).startswith(PREFIX)


def _compressed(rt: Runtime) -> tuple[int, int, int]:
    with rt.store.engine.connect() as conn:
        nodes = sum(_packed(v) for v in conn.execute(
            text("SELECT output FROM ctx_nodes")).scalars())  # fmt: skip
        commits = sum(_packed(v) for v in conn.execute(
            text("SELECT items FROM ctx_commits")).scalars())  # fmt: skip
        events = sum(bytes(v).startswith(MAGIC) for v in conn.execute(
            text(f"SELECT state FROM {_events_table(rt)}")).scalars())  # fmt: skip
    return nodes, commits, events


def test_an_uncompressed_store_reads_the_same_and_rebuilds_identical(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        sid = str(rt.execute("start_session", title="old")[0])
        rt.execute("append_node", sid, role="user", input="read the module")
        rt.execute("append_node", sid, role="assistant", output="reading it " * 100)
        rt.execute("append_node", sid, role="tool", name="read_file", output=RESULT)
        assert all(n > 0 for n in _compressed(rt))
        served = (rt.rendered(sid), rt.head_commit(sid))
    finally:
        rt.close()
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        _unpacked_everywhere(rt)
        assert _compressed(rt) == (0, 0, 0)
    finally:
        rt.close()
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        assert (rt.rendered(sid), rt.head_commit(sid)) == served
        rt.execute("append_node", sid, role="user", input="and again " * 100)
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"] is True
    assert t.nodes.name == "ctx_nodes" and t.commits.name == "ctx_commits"
