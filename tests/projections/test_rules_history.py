"""The rules history: which policy projected which event, live and in a rebuild.

A rebuild replays each event under the policy the ``ctx_rules`` table says
was in force at its position, so the live projection must have used that
same policy for the rebuild to come out byte-identical (invariant 10).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from domain.policy import Policy
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TIGHT = Policy(tail_turns=1, batch_trigger=0.0, clear_at_least=0)  # ages as soon as due


def session_with_a_tool(rt: Runtime) -> str:
    sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", at=T0)
    rt.execute("append_node", sid, role="user", input="task", at=T0)
    rt.execute("append_node", sid, role="assistant", output="reading", at=T0)
    rt.execute("append_node", sid, role="tool", name="grep", output="a\nb", at=T0)
    return str(sid)


def turns(rt: Runtime, sid: str, n: int) -> None:
    for i in range(n):
        rt.execute("append_node", sid, role="assistant", output=f"turn {i}", at=T0)


def test_a_restart_with_new_rules_applies_them_from_the_next_event(store_url: str) -> None:
    first = Runtime(store_url, auto_compact=False)
    sid = session_with_a_tool(first)
    first.close()
    second = Runtime(store_url, policy=TIGHT, auto_compact=False)
    try:
        turns(second, sid, 3)
        line = second.timeline(sid)
        assert [c["rules_version"] for c in line] == (
            [Policy().rules_version] * 3 + [TIGHT.rules_version] * 3
        )
        assert line[-2]["counts"]["aged"] == 1, "tail 1: two turns since is old"
    finally:
        second.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_a_running_process_follows_rules_another_process_recorded(store_url: str) -> None:
    live = Runtime(store_url, auto_compact=False)
    try:
        sid = session_with_a_tool(live)
        Runtime(store_url, policy=TIGHT, auto_compact=False).close()  # records TIGHT
        turns(live, sid, 3)
    finally:
        live.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_rules_recorded_with_a_backlog_start_after_the_stored_events(store_url: str) -> None:
    """Events stored under the old rules but not yet projected keep the old rules."""
    live = Runtime(store_url, auto_compact=False)
    try:
        sid = session_with_a_tool(live)
        for i in range(3):  # stored, not projected: as if the server died before catching up
            live.app.append_node(sid, role="assistant", output=f"late {i}", at=T0)
        newest = live.app.recorder.max_notification_id()
    finally:
        live.close()
    second = Runtime(store_url, policy=TIGHT, auto_compact=False)
    try:
        history = second.store.policy_history()
        assert [start for start, _ in history] == [1, newest + 1]
        assert {c["rules_version"] for c in second.timeline(sid)} == {Policy().rules_version}
    finally:
        second.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_rules_recorded_between_two_pages_of_a_catch_up_apply_to_the_next(
    store_url: str,
) -> None:
    """Another process records rules while this one is midway through a backlog."""
    live = Runtime(store_url, auto_compact=False)
    try:
        sid = session_with_a_tool(live)
        for i in range(6):
            live.app.append_node(sid, role="assistant", output=f"turn {i}", at=T0)
        real_batch = live.store.batch
        entered: list[int] = []

        def batch(*part: int) -> Any:
            entered.append(1)
            if len(entered) == 2:  # after the first page committed, before the second
                Runtime(store_url, policy=TIGHT, auto_compact=False).close()
                for i in range(2):  # stored after the new rules: theirs
                    live.app.append_node(sid, role="assistant", output=f"after {i}", at=T0)
            return real_batch(*part)

        live.store.batch = batch  # type: ignore[method-assign]
        live.processor.catch_up(page=2)
        versions = [c["rules_version"] for c in live.timeline(sid)]
        assert versions[-2:] == [TIGHT.rules_version] * 2, "events after the record: new rules"
        assert versions[-3] == Policy().rules_version, "the backlog before it: the old ones"
    finally:
        live.close()
    assert rebuild_and_compare(store_url)["identical"]
