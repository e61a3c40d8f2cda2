"""The bulk writer stores every value exactly, whatever characters it holds.

On PostgreSQL rows go through ``COPY``, whose text format escapes tabs,
newlines and backslashes and spells NULL as ``\\N``: content that looks like
those escapes must come back byte for byte, and a rebuild must write the
same bytes again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from projections import tables as t
from projections.packed_text import unpack
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
AWKWARD = [
    "tab\there", "line\nbreak\r\nand carriage", "back\\slash \\\\ \\t \\n", "\\N", "\\.",
    "", " ", "quote ' and \" and `", "comma, semicolon; pipe |", "unicode é ß 漢字 🚀",
    "\x01\x7f control", "x" * 20_000,
]  # fmt: skip


def test_awkward_text_round_trips_and_rebuilds_identically(rt: Runtime, store_url: str) -> None:
    sid, _ = rt.execute("start_session", "t\tab\\title", at=T0)
    rt.execute("append_node", sid, role="user", input="task", at=T0)
    for n, text in enumerate(AWKWARD):
        at = T0 + timedelta(minutes=n + 1)
        rt.execute("append_node", sid, role="assistant", output=text, at=at)
        rt.execute("append_node", sid, role="tool", name="sh\tell", input={"a\\b": text},
                   output=text, metadata={"note": text}, at=at)  # fmt: skip
    rt.catch_up()
    with rt.store.engine.connect() as conn:
        rows = conn.execute(select(t.nodes.c.role, t.nodes.c.output, t.nodes.c.input,
                                   t.nodes.c.name)
                            .where(t.nodes.c.session_id == str(sid))
                            .order_by(t.nodes.c.seq)).all()  # fmt: skip
    tools = [r for r in rows if r.role == "tool"]
    stored = [json.loads(unpack(r.output)) for r in tools]  # a long one is packed
    assert stored == AWKWARD
    assert {r.name for r in tools} == {"sh\tell"}
    assert [json.loads(unpack(r.input)) for r in tools] == [{"a\\b": text} for text in AWKWARD]
    assert [s["title"] for s in rt.sessions()] == ["t\tab\\title"]
    rendered = {i["rendered"] for i in rt.head_commit(str(sid))["items"]}
    assert "\\N" in rendered and "tab\there" in rendered
    result = rebuild_and_compare(store_url)
    assert result["identical"], result


def test_reads_never_wait_for_a_writer_on_sqlite(tmp_path: Any) -> None:
    """WAL readers see a snapshot; only the projection's writers take the write lock."""
    import sqlite3
    import time

    path = tmp_path / "locked.db"
    rt = Runtime(f"sqlite:///{path}", auto_compact=False)
    try:
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o")
        rt.execute("append_node", sid, role="user", input="hi")
        # With P > 1 a command catches up its own partition; the others still have
        # a position to record, which is a write: record it first, then idle.
        rt.catch_up()
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another process mid-batch
        try:
            started = time.perf_counter()
            assert rt.head_commit(str(sid))["head_node_id"]
            assert rt.timeline(str(sid)) and rt.position() > 0
            assert rt.catch_up() == 0, "nothing new: an idle poll takes no lock"
            assert time.perf_counter() - started < 10, "the reads waited for the writer"
        finally:
            writer.execute("COMMIT")
            writer.close()
    finally:
        rt.close()
