"""A commit's total_tokens is the sum of what its visible items cost, however it was built."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from projections.runtime import Runtime

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def visible_sum(commit: dict) -> int:  # type: ignore[type-arg]
    return sum(i["tokens"] for i in commit["items"] if i["state"] != "summarized")


def test_a_capped_result_counts_at_its_capped_size(rt: Runtime) -> None:
    sid, _ = rt.execute("start_session", "t", at=T0)
    rt.execute("append_node", sid, role="user", input="go", at=T0)
    caller, _ = rt.execute("append_node", sid, role="assistant", output="read", at=T0)
    rt.execute("append_node", sid, role="tool", name="read_file", input={"p": "x"},
               output="word " * 5_000, at=T0 + timedelta(minutes=1))  # fmt: skip
    live = rt.head_commit(sid)
    assert any(i["truncated"] for i in live["items"])
    assert live["total_tokens"] == visible_sum(live)
    # A retry builds from the parent's stored items: the same totals either way.
    rt.execute("add_sibling", sid, of=caller, output="read", at=T0 + timedelta(minutes=2))
    rt.execute("checkout", sid, caller, at=T0 + timedelta(minutes=3))
    for row in rt.timeline(sid):
        commit = rt.commit(sid, row["commit_id"])
        assert commit["total_tokens"] == visible_sum(commit)
