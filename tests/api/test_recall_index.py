"""Recall's index without a copy of the text (revision 0014): no plain text stored, hits
read from the nodes, an 0013 store migrated, an online rebuild's switch re-indexed."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, select
from starlette.testclient import TestClient

from projections import recall_index
from projections import tables as t
from projections.migrate import downgrade, upgrade
from projections.online_rebuild import online_rebuild
from projections.rebuild import digest, rebuild_and_compare
from tests.api.test_commands import append, ok, start
from tests.api.test_recall import recall
from tests.api.test_recall_rows import _fts_terms, _indexed_texts, _recall_rows, back_to_0014


def test_the_store_keeps_no_plain_copy(client: TestClient, store_url: str) -> None:
    marker = "PLAINCOPY" + secrets.token_hex(8).upper()
    sid = start(client)
    said = f"the {marker} is here. " + "filler words about the harbour " * 40
    node = append(client, sid, "user", input=said)
    hit = recall(client, sid, marker)[0]
    assert hit["node_id"] == node and hit["text"] == said
    if store_url.startswith("sqlite"):  # events and node rows compressed; the index lowercase
        path = Path(store_url[len("sqlite:///") :])
        raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        assert marker.encode() not in raw


def _columns(rt: Any) -> set[str]:
    with rt.store.engine.connect() as conn:
        return {c["name"] for c in inspect(conn).get_columns("ctx_recall")}


def test_an_0013_store_migrates(client: TestClient, runtime: Any, store_url: str) -> None:
    sid = start(client)
    append(client, sid, "user", input="an old conversation about lighthouses and tides")
    caller = append(client, sid, "assistant", output="reading: lighthouses/guide.md")
    append(client, sid, "tool", name="read_file", input={"path": "lighthouses/guide.md"},
           output="lighthouses guide ships\u0000 at night", caller=caller)  # fmt: skip
    append(client, sid, "user", input="what do lighthouses do at night?")
    back_to_0014(store_url)
    rows, digests = _recall_rows(runtime), digest(runtime.store)
    texts = _indexed_texts(runtime, sid)
    hits = recall(client, sid, "lighthouses night")
    assert "text" not in _columns(runtime)

    downgrade(store_url, "0013")  # the text column back, from the nodes
    with runtime.store.engine.connect() as conn:
        query = "SELECT text FROM ctx_recall ORDER BY notification_id"
        old = [r for (r,) in conn.exec_driver_sql(query)]
    assert old == texts and len(old) == len(rows) == 4
    upgrade(store_url, "0014")  # the revisions under test: 0015 empties all for a rebuild
    assert "text" not in _columns(runtime)
    assert _recall_rows(runtime) == rows and digest(runtime.store) == digests
    assert recall(client, sid, "lighthouses night") == hits
    assert rebuild_and_compare(store_url)["identical"]


def test_a_switch_that_disagrees_reindexes(
    client: TestClient, runtime: Any, store_url: str
) -> None:
    """A live recall row went missing (unindexed with it): the switch brings both back."""
    sid = start(client)
    lost = append(client, sid, "user", input="the quokka sleeps by day")
    append(client, sid, "assistant", output="and forages by night")
    with runtime.store.engine.begin() as conn:
        key = conn.execute(select(t.recall.c.notification_id)
                           .where(t.recall.c.node_id == lost)).scalar_one()  # fmt: skip
        if conn.dialect.name == "sqlite":
            recall_index._forget(conn, None, recall_index.node_texts(
                conn, None, " WHERE r.notification_id = :key", {"key": key}))  # fmt: skip
        conn.execute(t.recall.delete().where(t.recall.c.notification_id == key))
    assert [h["node_id"] for h in recall(client, sid, "quokka")] == []
    done = online_rebuild(store_url, expect_identical=False)
    assert not done.identical and done.switched
    assert [h["node_id"] for h in recall(client, sid, "quokka")] == [lost]
    assert rebuild_and_compare(store_url)["identical"]


def test_an_erasure_leaves_no_word_even_if_texts_drifted(
    client: TestClient, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were a node's text computed otherwise now than when it was indexed, FTS5's
    ``delete`` would remove other words than it holds: the index is made again."""
    if not store_url.startswith("sqlite"):
        pytest.skip("PostgreSQL's vector is a column of the row the erasure deletes")
    marker = "DRIFTED" + secrets.token_hex(8)
    erased, kept = start(client), start(client)
    append(client, erased, "user", input=f"the plan is {marker}")
    append(client, kept, "user", input="the wombat stays")
    monkeypatch.setattr(recall_index, "stored_text", lambda *_: "some other words")
    ok(client.delete(f"/sessions/{erased}"))
    assert _fts_terms(store_url, marker.lower()[:12]) == []
    # made again as the texts are computed now: the kept row's words are those
    assert _fts_terms(store_url, "wombat") == [] and _fts_terms(store_url, "other") == ["other"]
    assert [h["session_id"] for h in recall(client, kept, "other words")] == [kept]
