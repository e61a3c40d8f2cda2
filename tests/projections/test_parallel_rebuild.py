"""A rebuild whose partitions are projected by two processes (issue 14).

The rows must be the ones one process makes, attaches and merges across
partitions included (an event waiting for another process's partition),
offline and online alike.  SQLite has one writer: there ``--processes``
falls back to one process and still rebuilds the same rows.
"""

from __future__ import annotations

import pytest

from projections.online_rebuild import online_rebuild
from projections.parallel_catch_up import shares
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime


def test_partitions_are_dealt_out_round_robin_with_no_empty_share() -> None:
    assert shares(8, 2) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert shares(3, 2) == [[0, 2], [1]]
    assert shares(2, 4) == [[0], [1]]


def _fill(rt: Runtime) -> list[str]:
    sids = [str(rt.execute("start_session", f"s{n}", "local:tiny")[0]) for n in range(8)]
    heads: dict[str, str] = {}
    for turn in range(4):
        for i, sid in enumerate(sids):
            rt.execute("append_node", sid, role="user", input=f"turn {turn} of {i}")
            heads[sid] = str(rt.execute("append_node", sid, role="assistant",
                                        output=f"answer {turn} of {i}")[0])  # fmt: skip
            if turn == 1:  # reads another session, likely of another partition
                rt.execute("attach", sid, sids[(i + 3) % len(sids)])
    branch = str(rt.execute("branch", sids[0], heads[sids[0]])[0])
    tip = str(rt.execute("append_node", branch, role="user", input="on the branch")[0])
    rt.execute("merge", sids[0], [{"session_id": branch, "node_id": tip}])
    return sids


@pytest.mark.parametrize("online", [False, True])
def test_two_processes_rebuild_the_rows_one_process_makes(
    store_url: str, monkeypatch: pytest.MonkeyPatch, online: bool
) -> None:
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    rt = Runtime(store_url, auto_compact=False)
    try:
        _fill(rt)
    finally:
        rt.close()
    if online:
        result = online_rebuild(store_url, processes=2)
        assert result.identical and result.switched, result
    else:
        found = rebuild_and_compare(store_url, processes=2)
        assert found["identical"], {k for k in found["after"]
                                    if found["before"][k] != found["after"][k]}  # fmt: skip
    assert rebuild_and_compare(store_url)["identical"]  # and one process agrees


def test_a_partition_behind_reads_only_its_own_events_states(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backlog (a worker's, a rebuild's) is read as headers plus the partition's own
    states, and projects the same rows as reading every state."""
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite reads the log on the batch's own connection, whole")
    from projections import notification_reads
    from tests.spies import calls_of

    monkeypatch.setenv("CTXSTORE_PARTITIONS", "4")
    rt = Runtime(store_url, auto_compact=False, auto_catch_up=False)
    try:
        sids = [str(rt.app.start_session(f"s{n}", "local:tiny")[0]) for n in range(6)]
        for turn in range(12):
            for sid in sids:
                rt.app.append_node(sid, role="user", input=f"turn {turn} " * 50)
        rt.app.attach(sids[0], sids[1])
        sparse = calls_of(monkeypatch, notification_reads, "sparse_notifications")
        rt.catch_up()
        assert sparse, "a backlog of a hundred events was read whole"
        assert sum(rt.session_info(sid)["counts"]["nodes"] for sid in sids) == 6 * 12 + 1
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]
