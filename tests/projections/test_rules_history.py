"""The rules history: which policy projected which event, live and in a rebuild.

A rebuild replays each event under the policy the ``ctx_rules`` table says
was in force at its position, so the live projection must have used that
same policy for the rebuild to come out byte-identical (invariant 10).
"""

from __future__ import annotations

from datetime import UTC, datetime

from domain.policy import Policy
from projections.rebuild import rebuild_and_compare
from projections.runtime import Runtime

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TIGHT = Policy(tail_turns=1)


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
