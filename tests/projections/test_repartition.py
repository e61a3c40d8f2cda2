"""Splitting a store into a new number of partitions (issue 14, review findings).

An offline ``ctxstore rebuild`` with a new ``CTXSTORE_PARTITIONS`` is how a
store is split anew.  Its digests must compare what was projected, not how
it was split; a process still running with the old count must refuse with
``restart_required`` rather than fail on a missing row or hash sessions the
old way; and tracking rows emptied since are made again with the process's
own count.
"""

from __future__ import annotations

import pickle

import pytest
from starlette.testclient import TestClient

from api.app import create_app
from domain.policy import Policy
from projections.rebuild import rebuild_and_compare
from projections.tracking import PartitionCountChanged
from service.runtime import Runtime


def _fill(rt: Runtime, sessions: int = 6) -> list[str]:
    sids = [str(rt.execute("start_session", f"s{n}", "local:tiny")[0]) for n in range(sessions)]
    for i, sid in enumerate(sids):
        rt.execute("append_node", sid, role="user", input=f"hello {i}")
        rt.execute("append_node", sid, role="assistant", output=f"hi {i}")
    rt.execute("attach", sids[0], sids[1])
    return sids


def test_a_rebuild_into_a_new_count_compares_content_not_the_split(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    rt = Runtime(store_url, auto_compact=False)
    sids = _fill(rt)
    before = {sid: rt.session_info(sid)["counts"] for sid in sids}
    rt.close()
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "2")
    result = rebuild_and_compare(store_url)
    assert result["identical"], result
    assert result["partitions"] == {"before": 4, "after": 2}
    rt = Runtime(store_url, auto_compact=False)
    try:
        assert rt.processor.partitions == 2 and sorted(rt.store.positions()) == [0, 1]
        assert {sid: rt.session_info(sid)["counts"] for sid in sids} == before
    finally:
        rt.close()
    monkeypatch.delenv("CTXSTORE_PARTITIONS")  # a shell that does not set it keeps the split
    again = rebuild_and_compare(store_url)  # the same count: the whole layout compared
    assert again["identical"] and "partitions" not in again
    assert "ctx_tracking" in again["after"]
    rt = Runtime(store_url, auto_compact=False)
    try:
        assert rt.processor.partitions == 2
    finally:
        rt.close()


@pytest.mark.parametrize("resplit", [2, 8])
def test_a_process_running_through_a_resplit_refuses_with_restart_required(
    store_url: str, monkeypatch: pytest.MonkeyPatch, resplit: int
) -> None:
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    rt = Runtime(store_url, auto_compact=False)
    try:
        sids = _fill(rt)
        monkeypatch.setenv("CTXSTORE_PARTITIONS", str(resplit))
        assert rebuild_and_compare(store_url)["identical"]
        # The command is stored; catching up is what cannot go on.
        executed = rt.run("append_node", sids[2], role="user", input="after the resplit")
        assert executed.follow_up["catch_up"]["error"]["code"] == "restart_required", executed
        with pytest.raises(PartitionCountChanged, match="restart"):
            rt.session_info(sids[2])
        # A partition with nothing new to project still answers from what it holds
        # (which the log still says); one with something new refuses.
        client = TestClient(create_app(rt), base_url="http://localhost")
        response = client.get(f"/sessions/{sids[2]}")
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "restart_required"
    finally:
        rt.close()
    rt = Runtime(store_url, auto_compact=False)  # restarted: split as the store is
    try:
        assert rt.processor.partitions == resplit
        assert rt.session_info(sids[2])["counts"]["nodes"] == 3
    finally:
        rt.close()


def test_emptied_tracking_rows_come_back_with_the_process_count(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "3")
    rt = Runtime(store_url, auto_compact=False)
    try:
        _fill(rt, 2)
        rt.store.truncate()  # what a rebuild does first
        rt.store.record_policy(Policy(result_cap=11), rt.app.recorder.max_notification_id() or 0,
                               rt.processor.partitions)  # fmt: skip
        assert sorted(rt.store.positions()) == [0, 1, 2]
    finally:
        rt.close()


def test_a_process_appending_while_a_resplit_empties_the_tables_cannot_keep_its_split(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild's truncate makes the new tracking rows in its own transaction, so a
    process still split the old way never gets to make them with its count."""
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    rt = Runtime(store_url, auto_compact=False)
    try:
        sids = _fill(rt, 2)
        rt.store.truncate(8)  # what rebuild does first, with CTXSTORE_PARTITIONS=8
        executed = rt.run("append_node", sids[0], role="user", input="in the gap")
        assert "catch_up" in executed.follow_up
        assert sorted(rt.store.positions()) == list(range(8))
    finally:
        rt.close()


def test_the_restart_error_crosses_a_process_boundary() -> None:
    """A rebuild's helper process raises it to its parent through a pickle."""
    again = pickle.loads(pickle.dumps(PartitionCountChanged(8, 4)))
    assert (again.stored, again.mine, again.code) == (8, 4, "restart_required")
    assert "8 partitions" in str(again)
