"""A large state is stored beside the events table, outside the append's lock (issue 13).

The locked insert carries a stub; every read gives back the state appended,
and an append that fails leaves no payload behind.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from projections.pg_events import UnpipelinedRecorder
from projections.pg_payloads import LARGE_STATE, is_stub


def _rows(pg_recorder: UnpipelinedRecorder, sql: str) -> list[Any]:
    with pg_recorder.datastore.get_connection() as conn, conn.cursor() as curs:
        curs.execute(
            sql.format(events=pg_recorder.events_table_name, payloads=pg_recorder.payloads.name)
        )
        return [tuple(row.values()) for row in curs.fetchall()]


def test_a_large_state_goes_beside_the_events_and_reads_back_whole(
    pg_recorder: UnpipelinedRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    originator = uuid.uuid4()
    large = b'{"output":"' + b"x" * LARGE_STATE + b'"}'
    pg_recorder.insert_events([StoredEvent(originator, 1, "tests:Probe", b"{}")])
    sizes: list[int] = []
    execute = psycopg.Cursor.execute

    def traced(self: psycopg.Cursor[Any], query: Any, params: Any = None, **kw: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self.connection)
        if pg_recorder.append_function in text:
            sizes.append(sum(len(s) for s in params[3]))
        return execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", traced)
    ids = pg_recorder.insert_events([StoredEvent(originator, 2, "tests:Probe", large),
                                  StoredEvent(originator, 3, "tests:Probe", b"{}")])  # fmt: skip
    monkeypatch.undo()
    assert sizes and max(sizes) < 100, "the locked insert carried the large state"
    stored = _rows(pg_recorder, "SELECT originator_version, state FROM {events} ORDER BY 1")
    assert [is_stub(bytes(s)) for _, s in stored] == [False, True, False]
    assert len(_rows(pg_recorder, "SELECT payload_id FROM {payloads}")) == 1
    assert [e.state for e in pg_recorder.select_events(originator)] == [b"{}", large, b"{}"]
    notes = pg_recorder.select_notifications(start=ids[0], limit=10)
    assert [n.state for n in notes] == [large, b"{}"]


def test_an_append_that_fails_leaves_no_payload(pg_recorder: UnpipelinedRecorder) -> None:
    originator = uuid.uuid4()
    pg_recorder.insert_events([StoredEvent(originator, 1, "tests:Probe", b"{}")])
    large = b'{"output":"' + b"y" * LARGE_STATE + b'"}'
    with pytest.raises(IntegrityError):
        pg_recorder.insert_events([StoredEvent(originator, 1, "tests:Probe", large)])
    assert _rows(pg_recorder, "SELECT payload_id FROM {payloads}") == []
    assert [e.state for e in pg_recorder.select_events(originator)] == [b"{}"]


def test_an_append_interrupted_after_its_commit_keeps_its_payload(
    pg_recorder: UnpipelinedRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client cannot tell whether the server committed: a payload an event names stays."""
    originator = uuid.uuid4()
    large = b'{"output":"' + b"z" * LARGE_STATE + b'"}'
    pg_recorder.insert_events([StoredEvent(originator, 1, "tests:Probe", b"{}")])
    fetchall = psycopg.Cursor.fetchall

    def interrupted(self: psycopg.Cursor[Any]) -> Any:
        rows = fetchall(self)
        if rows and pg_recorder.append_function in str(rows[0]):
            raise KeyboardInterrupt  # the answer came back; the caller never sees it
        return rows

    monkeypatch.setattr(psycopg.Cursor, "fetchall", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pg_recorder.insert_events([StoredEvent(originator, 2, "tests:Probe", large)])
    monkeypatch.undo()
    assert [e.state for e in pg_recorder.select_events(originator)] == [b"{}", large]
    with pg_recorder.datastore.get_connection() as conn:  # a payload no event names
        pg_recorder.payloads.store(conn, [StoredEvent(originator, 9, "tests:Probe", large)], [])
    assert len(_rows(pg_recorder, "SELECT payload_id FROM {payloads}")) == 2
    with pg_recorder.datastore.get_connection() as conn:
        named = [int(r[0]) for r in _rows(pg_recorder, "SELECT payload_id FROM {payloads}")]
        pg_recorder.payloads.discard(conn, named)
    assert len(_rows(pg_recorder, "SELECT payload_id FROM {payloads}")) == 1


def test_a_read_that_meets_a_payload_erased_meanwhile_reads_again(
    pg_recorder: UnpipelinedRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from projections import pg_events
    from projections.pg_payloads import PayloadMissing

    originator = uuid.uuid4()
    large = b'{"output":"' + b"w" * LARGE_STATE + b'"}'
    pg_recorder.insert_events([StoredEvent(originator, 1, "tests:Probe", large)])
    real, calls = pg_events.resolve, []

    def once_missing(*args: Any) -> Any:
        calls.append(args)
        if len(calls) == 1:
            raise PayloadMissing("erased between the two reads")
        return real(*args)

    monkeypatch.setattr(pg_events, "resolve", once_missing)
    assert [e.state for e in pg_recorder.select_events(originator)] == [large]
    assert [n.state for n in pg_recorder.select_notifications(start=1, limit=5)] == [large]
    assert len(calls) == 3


def test_migrate_sweeps_old_payloads_no_event_names_and_nothing_else(
    pg_recorder: UnpipelinedRecorder, store_url: str
) -> None:
    """An append killed between storing its payload and appending its event leaves a
    payload nobody names: ``migrate`` (every server start) deletes it once it is older
    than an append can take, and keeps a named one, and a young one (in flight)."""
    from projections.migrate import upgrade

    originator = uuid.uuid4()
    large = b'{"output":"' + b"v" * LARGE_STATE + b'"}'
    pg_recorder.insert_events([StoredEvent(originator, 1, "tests:Probe", large)])
    with pg_recorder.datastore.get_connection() as conn:  # two killed appends' payloads
        for version in (2, 3):
            pg_recorder.payloads.store(conn, [StoredEvent(originator, version, "t", large)], [])
    ids = sorted(int(r[0]) for r in _rows(pg_recorder, "SELECT payload_id FROM {payloads}"))
    named, old_orphan, young_orphan = ids
    _rows(pg_recorder, "UPDATE {payloads} SET stored_at = now() - interval '2 hours' "
          f"WHERE payload_id IN ({named}, {old_orphan}) RETURNING payload_id")  # fmt: skip
    assert upgrade(store_url) == 1
    left = sorted(int(r[0]) for r in _rows(pg_recorder, "SELECT payload_id FROM {payloads}"))
    assert left == [named, young_orphan]
    assert [e.state for e in pg_recorder.select_events(originator)] == [large]
    assert upgrade(store_url) == 0
    _rows(pg_recorder, "UPDATE {payloads} SET stored_at = now() - interval '2 hours' "
          f"WHERE payload_id = {young_orphan} RETURNING payload_id")  # fmt: skip
    assert upgrade(store_url) == 1, "an orphan is swept once it is old enough"
    assert [int(r[0]) for r in _rows(pg_recorder, "SELECT payload_id FROM {payloads}")] == [named]


def test_the_sweep_looks_at_each_payload_once(
    pg_recorder: UnpipelinedRecorder, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every start sweeps: what it asks the events about is what came since the last."""
    from projections.migrate import upgrade

    originator = uuid.uuid4()
    large = b'{"output":"' + b"u" * LARGE_STATE + b'"}'
    pg_recorder.insert_events([StoredEvent(originator, 1, "tests:Probe", large)])
    _rows(pg_recorder, "UPDATE {payloads} SET stored_at = now() - interval '2 hours' "
          "RETURNING payload_id")  # fmt: skip
    asked: list[Any] = []
    execute = psycopg.Cursor.execute

    def traced(self: psycopg.Cursor[Any], query: Any, params: Any = None, **kw: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self.connection)
        if text.startswith("DELETE") and "NOT EXISTS" in text and "payload_id >" in text:
            asked.append(params)
        return execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", traced)
    assert upgrade(store_url) == 0 and upgrade(store_url) == 0
    assert len(asked) == 1, "the second start looked at the same payload again"
    assert [e.state for e in pg_recorder.select_events(originator)] == [large]


def test_a_payload_table_made_before_the_sweep_gets_its_column(
    pg_recorder: UnpipelinedRecorder, store_url: str
) -> None:
    from domain.application import CtxStore

    with pg_recorder.datastore.get_connection() as conn, conn.cursor() as curs:
        curs.execute(f"ALTER TABLE {pg_recorder.payloads.name} DROP COLUMN stored_at")
    CtxStore(url=store_url).close()
    assert _rows(pg_recorder, "SELECT count(*) FROM {payloads} WHERE stored_at <= now()")
