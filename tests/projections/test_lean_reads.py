"""A live batch reads another partition's large event as a header only, and its own
from what this process appended (issue 13).

An 8 MB tool result in one session cost every other session's next batch a
read of 8 MB it then threw away, and the appending process's own batch a
read back of what it had just sent.  Neither changes what is projected: a
process that did not append the event reads it from the store, and a
rebuild gives the same rows.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from projections.partitions import hashed
from projections.pg_events import LARGE_STATE
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.conftest import incompressible


def _state_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Queries that read events' whole states, from now on: by id, or eventsourcing's
    own read of the log (everything but the lean read's small states)."""
    seen: list[str] = []
    execute = psycopg.Cursor.execute

    def traced(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self.connection)
        whole_log = "SELECT * FROM" in text and "notification_id" in text
        by_id = "SELECT notification_id, state FROM" in text or "SELECT payload_id, state" in text
        if by_id or whole_log:
            seen.append(text)
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", traced)
    return seen


@pytest.mark.parametrize("partitions", [1, 4])
def test_large_states_are_read_only_by_their_partition_and_not_read_back(
    store_url: str, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite reads the log on the batch's own connection, whole")
    monkeypatch.setenv("CTXSTORE_PARTITIONS", str(partitions))
    big = "a large tool result " + incompressible(2 * LARGE_STATE)
    rt = Runtime(store_url, auto_compact=False)
    try:
        first = str(rt.app.start_session("big", "local:tiny")[0])
        other = first
        while partitions > 1 and hashed(other, partitions) == hashed(first, partitions):
            other = str(rt.app.start_session("small", "local:tiny")[0])
        if other == first:
            other = str(rt.app.start_session("small", "local:tiny")[0])
        rt.execute("append_node", other, role="user", input="before")
        reads = _state_reads(monkeypatch)
        for turn in range(3):
            rt.execute("append_node", first, role="user", input=f"{turn} {big}")
            rt.execute("append_node", other, role="user", input=f"small {turn}")
        monkeypatch.undo()
        assert reads == [], "a large state was read back by the process that appended it"
        nodes = rt.branch_nodes(first)["nodes"]
        assert [n["input"] for n in nodes] == [f"{turn} {big}" for turn in range(3)]
    finally:
        rt.close()
    fresh = Runtime(store_url, auto_compact=False)  # another process: nothing remembered
    try:
        assert [n["input"] for n in fresh.branch_nodes(first)["nodes"]][-1] == f"2 {big}"
    finally:
        fresh.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_a_lean_read_leaves_unwanted_large_states_empty(store_url: str) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite reads the log on the batch's own connection, whole")
    from projections.notification_reads import lean_notifications

    rt = Runtime(store_url, auto_compact=False)
    try:
        sid = str(rt.app.start_session("big", "local:tiny")[0])
        rt.execute("append_node", sid, role="user", input=incompressible(2 * LARGE_STATE))
        rt.app.recorder.recent = type(rt.app.recorder.recent)()  # as another process
        with rt.store.engine.connect() as conn:
            stored = rt.app.recorder.select_notifications(start=1, limit=100)
            large = {n.id for n in stored if len(n.state) >= LARGE_STATE}
            assert large
            for wanted in (False, True):
                notes = lean_notifications(rt.app.recorder, conn, 1, 100, None,
                                           lambda _, w=wanted: w)  # fmt: skip
                assert [n.id for n in notes] == [n.id for n in stored]
                for note, whole in zip(notes, stored, strict=True):
                    kept = wanted or note.id not in large
                    assert note.state == (whole.state if kept else b"")
    finally:
        rt.close()


@pytest.mark.parametrize("partitions", [1, 8])
def test_an_erasure_drops_the_large_states_a_process_remembers(
    store_url: str, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    """Here and in another process, which learns of it at its next batch, whichever
    partition that batch is for (one whose projector is new never looked before)."""
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite reads the log on the batch's own connection, whole")
    from service.erasure import Eraser

    monkeypatch.setenv("CTXSTORE_PARTITIONS", str(partitions))
    secret = "SECRET-" + incompressible(2 * LARGE_STATE)
    one, two = Runtime(store_url, auto_compact=False), Runtime(store_url, auto_compact=False)
    try:
        gone = str(one.app.start_session("erased", "local:tiny")[0])
        kept = str(one.app.start_session("kept", "local:tiny")[0])
        while partitions > 1 and hashed(kept, partitions) == hashed(gone, partitions):
            kept = str(one.app.start_session("kept", "local:tiny")[0])
        for rt in (one, two):
            rt.execute("append_node", gone, role="user", input=secret)
        assert all(rt.app.recorder.recent._states for rt in (one, two))
        Eraser(two).erase(gone, "test")
        assert not two.app.recorder.recent._states
        one.execute("append_node", kept, role="user", input="after")
        held = [s for s in one.app.recorder.recent._states.values() if b"SECRET-" in s]
        assert held == []
    finally:
        one.close()
        two.close()
