"""The rows recall searches (``ctx_recall``): erased with their session, rebuilt
byte-identical, and back-filled by the migration that added them."""

from __future__ import annotations

import secrets
import sqlite3
from typing import Any

from sqlalchemy import func, select
from starlette.testclient import TestClient

from projections import recall_index
from projections import tables as t
from projections.migrate import downgrade, upgrade
from projections.rebuild import digest, rebuild_and_compare
from service.runtime import Runtime
from tests.api.test_commands import append, ok, start
from tests.api.test_erasure import _store_text
from tests.api.test_recall import recall


def back_to_0014(store_url: str) -> None:
    """Migrate down to 0014 and project the log again: 0015's downgrade empties the
    projections (rows in its format would not load in older code), and the tests of
    older revisions start from 0014's rows, which the same events make again."""
    downgrade(store_url, "0014")
    again = Runtime(store_url, auto_compact=False, auto_catch_up=False, migrate=False)
    try:
        again.catch_up()
    finally:
        again.close()


def _recall_rows(rt: Any, session_id: str | None = None) -> list[Any]:
    query = select(t.recall).order_by(t.recall.c.notification_id)
    if session_id is not None:
        query = query.where(t.recall.c.session_id == session_id)
    with rt.store.engine.connect() as conn:
        return list(conn.execute(query))


def _indexed_texts(rt: Any, session_id: str) -> list[str]:
    """The texts ``session_id``'s rows stand for in the index (the rows keep no copy)."""
    with rt.store.engine.connect() as conn:
        return [x for _, x in recall_index.node_texts(conn, None, " WHERE r.session_id = :sid "
                                                      "ORDER BY r.notification_id",
                                                      {"sid": session_id})]  # fmt: skip


def _fts_terms(url: str, prefix: str) -> list[str]:
    """The terms SQLite's FTS5 index holds that start with ``prefix`` (lower case)."""
    with sqlite3.connect(url[len("sqlite:///") :]) as conn:
        conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, ctx_recall_fts, row)")
        found = [r[0] for r in conn.execute("SELECT term FROM temp.terms WHERE term >= ? "
                                            "AND term < ?", (prefix, prefix + "~"))]  # fmt: skip
    conn.close()
    return found


def test_an_erased_sessions_rows_and_words_are_gone(
    client: TestClient, runtime: Any, store_url: str
) -> None:
    marker = "RECALLME" + secrets.token_hex(12)
    erased = start(client)
    append(client, erased, "user", input=f"the plan is {marker}, keep it")
    append(client, erased, "assistant", output=f"noted {marker}")
    kept = start(client)
    for i in range(8):  # enough batches that FTS5 merged the marker into an older segment
        append(client, kept, "user", input=f"another session entirely, turn {i}")
    assert len(recall(client, erased, marker)) == 2
    assert marker.encode() in _store_text(store_url)
    if store_url.startswith("sqlite"):
        assert _fts_terms(store_url, marker.lower()[:14])

    ok(client.delete(f"/sessions/{erased}"))
    assert _recall_rows(runtime, erased) == []
    assert {r.session_id for r in _recall_rows(runtime)} == {kept}
    stored = _store_text(store_url)
    assert marker.encode() not in stored and marker.lower().encode()[:14] not in stored
    if store_url.startswith("sqlite"):  # not even as a term marked deleted in the index
        assert _fts_terms(store_url, marker.lower()[:14]) == []
    assert recall(client, kept, "another")[0]["session_id"] == kept
    assert rebuild_and_compare(store_url)["identical"]


def test_a_rebuild_gives_the_same_recall_rows(
    client: TestClient, runtime: Any, store_url: str
) -> None:
    a = start(client)
    first = append(client, a, "user", input="the harbour pilot reads tides")
    for i in range(4):
        append(client, a, "assistant", output=f"tide table {i}")
        append(client, a, "user", input=f"and the moon {i}")
    branch = ok(client.post(f"/sessions/{a}/branch", json={"node_id": first}), 201)["session_id"]
    caller = append(client, branch, "assistant", output="reading the docs")
    tool = append(client, branch, "tool", name="read_file", input={"path": "docs/tides.md"},
           output="high water at noon", caller=caller)  # fmt: skip
    before = _recall_rows(runtime)
    assert len(before) == 11
    result = rebuild_and_compare(store_url)
    assert result["identical"] and "ctx_recall" in result["before"]
    assert _recall_rows(runtime) == before
    # the index is the rebuilt rows' own: the tool's name, arguments and result answer,
    # and of the source only what precedes the branch point ("tide table" does not)
    hits = [h["node_id"] for h in recall(client, branch, "read_file tides.md noon")]
    assert hits[0] == tool and set(hits) == {tool, caller, first}


def test_the_migration_back_fills_a_stored_history(
    client: TestClient, runtime: Any, store_url: str
) -> None:
    sid = start(client)
    node = append(client, sid, "user", input="an old conversation about lighthouses")
    append(client, sid, "assistant", output="lighthouses guide ships")
    back_to_0014(store_url)
    rows, digests = _recall_rows(runtime), digest(runtime.store)
    downgrade(store_url, "0012")
    with runtime.store.engine.connect() as conn:
        assert "ctx_recall" not in runtime.store.engine.dialect.get_table_names(conn)
    upgrade(store_url, "0014")  # the revisions under test: 0015 empties all for a rebuild
    assert _recall_rows(runtime) == rows and digest(runtime.store) == digests
    assert recall(client, sid, "lighthouse guide")[0]["node_id"] != node
    assert {h["node_id"] for h in recall(client, sid, "lighthouse")} == {r.node_id for r in rows}
    with runtime.store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(t.recall)).scalar() == 2


def test_a_node_without_text_has_no_row(client: TestClient, runtime: Any) -> None:
    source = start(client)
    append(client, source, "user", input="words")
    target = start(client)
    ok(client.post(f"/sessions/{target}/attach", json={"source_session": source}), 201)
    assert [r.role for r in _recall_rows(runtime)] == ["user"]


def test_text_that_postgresql_or_the_digest_could_trip_on(
    client: TestClient, runtime: Any, store_url: str
) -> None:
    """A NUL (a binary file read: PostgreSQL's text refuses it), a text that begins as a
    packed column does (``zlib:``), and a title that does: projected, found, rebuilt."""
    sid = start(client, title="zlib: notes")
    caller = append(client, sid, "assistant", output="reading the blob")
    append(client, sid, "tool", name="read_file", input={"path": "a.bin"},
           output="head\u0000tail quokka", caller=caller)  # fmt: skip
    append(client, sid, "user", input="zlib: which codec packs the quokka archive?")
    texts = _indexed_texts(runtime, sid)
    assert not any("\x00" in x for x in texts) and any("head tail quokka" in x for x in texts)
    assert len(recall(client, sid, "quokka")) == 2
    assert rebuild_and_compare(store_url)["identical"]


def test_recalls_own_answers_are_not_searched_again(client: TestClient, runtime: Any) -> None:
    sid = start(client)
    append(client, sid, "user", input="the wombat burrow is under the shed")
    caller = append(client, sid, "assistant", output="let me look that up")
    answer = "1 hit matching 'wombat': the wombat burrow is under the shed"
    append(client, sid, "tool", name="recall", input={"query": "wombat"}, output=answer,
           caller=caller)  # fmt: skip
    assert [h["role"] for h in recall(client, sid, "wombat")] == ["user"]
    assert all("matching" not in x for x in _indexed_texts(runtime, sid))
