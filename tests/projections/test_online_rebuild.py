"""An online rebuild: the live tables keep serving while a client appends, nothing is lost,
and the switch leaves tables byte-identical to a rebuild from the log (issue 14)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import func, select

import projections.online_rebuild as online_module
from domain.policy import Policy
from projections import tables as t
from projections.online_rebuild import (
    ErasedDuringRebuild,
    RulesChangedDuringRebuild,
    online_rebuild,
)
from projections.rebuild import digest, rebuild_and_compare
from service.erasure import Eraser
from service.runtime import Runtime
from tests.projections.test_context_commit import add, at, start


def history(rt: Runtime, sessions: int = 4, turns: int = 15) -> list[str]:
    sids = []
    for s in range(sessions):
        sid = start(rt, f"session {s}")
        for turn in range(turns):
            add(rt, sid, "user", f"question {s}.{turn}", turn)
            add(rt, sid, "assistant", f"let me look {turn}", turn + 0.2)
            add(rt, sid, "tool", name="grep", input={"q": turn}, output=f"found {turn} " * 40,
                minute=turn + 0.5)  # fmt: skip
        sids.append(sid)
    rt.execute("branch", sids[0], rt.head_commit(sids[0])["head_node_id"], at=at(99))
    return sids


def test_a_rebuild_beside_a_client_appending_loses_nothing(rt: Runtime, store_url: str) -> None:
    sids = history(rt)
    stop, appended, seen_empty = threading.Event(), [], []

    def client() -> None:
        turn = 0
        while not stop.is_set():
            appended.append(add(rt, sids[turn % 2], "assistant", f"live {turn}", 100 + turn))
            turn += 1

    def reader() -> None:
        while not stop.is_set():
            with rt.store.engine.connect() as conn:
                if not conn.execute(select(func.count()).select_from(t.sessions)).scalar():
                    seen_empty.append(True)

    threads = [threading.Thread(target=client), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    try:
        done = online_rebuild(store_url)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert done.identical and done.switched, (done.before, done.after)
    assert done.switched_at is not None and done.switched_at >= done.checked_at
    assert not seen_empty, "readers always found the live tables full"
    assert appended, "the client appended during the rebuild"
    rt.catch_up()
    with rt.store.engine.connect() as conn:
        query = select(t.nodes.c.node_id).where(t.nodes.c.session_id.in_(sids[:2]))
        projected = set(conn.execute(query).scalars())
    assert set(appended) <= projected, "every node appended meanwhile is projected"
    assert rt.head_commit(sids[1])["head_node_id"] in appended
    add(rt, sids[2], "user", "after the switch", 500)  # the live process just goes on
    assert rebuild_and_compare(store_url)["identical"]


def test_a_rebuild_that_disagrees_switches_nothing(rt: Runtime, store_url: str) -> None:
    history(rt, sessions=2, turns=3)
    with rt.store.engine.begin() as conn:  # a live row drifted from what the log says
        conn.execute(t.sessions.update().values(title="tampered"))
    tampered = digest(rt.store)
    done = online_rebuild(store_url)
    assert not done.identical and not done.switched
    assert [k for k in done.before if done.before[k] != done.after[k]] == ["ctx_sessions"]
    assert digest(rt.store) == tampered, "the live tables are as they were"
    repaired = online_rebuild(store_url, expect_identical=False)
    assert repaired.switched
    assert rebuild_and_compare(store_url)["identical"]


def test_an_erasure_during_the_rebuild_stops_the_switch(
    rt: Runtime, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shadow projected a session that is then erased: switching it in would bring
    the erased content back."""
    sids = history(rt, sessions=2, turns=3)
    real = online_module._live_positions

    def erase_first(conn: Any) -> dict[int, int]:
        Eraser(rt).erase(sids[1], "test")
        return real(conn)

    monkeypatch.setattr(online_module, "_live_positions", erase_first)
    before = digest(rt.store)
    with pytest.raises(ErasedDuringRebuild):
        online_rebuild(store_url, expect_identical=False)
    assert digest(rt.store) != before, "the erasure itself stands"
    assert rebuild_and_compare(store_url)["identical"]


def test_rules_recorded_during_the_rebuild_stop_the_switch(
    rt: Runtime, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shadow copied the rules history at its start; rules recorded later would have
    the shadow project the newest events under the old rules."""
    sids = history(rt, sessions=2, turns=6)
    real = online_module._switch

    def late_rules(*args: Any, **kwargs: Any) -> int:
        rt.store.record_policy(Policy(result_cap=10, tail_turns=1),
                               rt.app.recorder.max_notification_id() or 0)  # fmt: skip
        for turn in range(4):
            add(rt, sids[0], "tool", name="grep", input={"q": turn}, output="late " * 500,
                minute=200 + turn)  # fmt: skip
        return int(real(*args, **kwargs))

    monkeypatch.setattr(online_module, "_switch", late_rules)
    with pytest.raises(RulesChangedDuringRebuild):
        online_rebuild(store_url)
    assert rebuild_and_compare(store_url)["identical"]
    assert online_rebuild(store_url).switched, "run again, it switches"
