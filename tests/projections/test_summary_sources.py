"""A fold summarizes what its items said, not the stubs aging left in the render."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.conftest import immediate_policy

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
RESULT = "# settings\nname = demo\nport = 8431\n" + "value = compute(value, option)\n" * 60


class Recording:
    name = "recording"

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    def summarize(self, items: list[dict[str, Any]]) -> str:
        self.seen.append(items)
        return "recorded"


def _session(rt: Runtime) -> str:
    sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=64_000, at=T0)
    clock = T0

    def append(role: str, **kw: Any) -> None:
        nonlocal clock
        clock += timedelta(seconds=10)
        rt.execute("append_node", sid, role=role, at=clock, **kw)

    append("user", input="Read the settings, then go on.")
    append("assistant", output="Reading the settings.")
    append("tool", name="read_file", input={"path": "conf/settings.toml"}, output=RESULT)
    for n in range(6):
        append("assistant", output=f"Step {n}: working on the next piece of the task.")
        append("user", input=f"Carry on with part {n}.")
    return str(sid)


def _tool_render(rt: Runtime, sid: str) -> str:
    messages = rt.rendered(sid, "openai")["request"]["messages"]
    return "\n".join(str(m.get("content")) for m in messages if m["role"] == "tool")


def test_the_summarizer_reads_sources_and_the_render_keeps_the_stub(store_url: str) -> None:
    spy = Recording()
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy(), summarizer=spy)
    try:
        sid = _session(rt)
        shown = _tool_render(rt, sid)
        assert "[tool result:" in shown and "8431" not in shown, "aging shows its stub"
        rt.compact(sid)
        tool = next(i for i in spy.seen[-1] if i["role"] == "tool")
        assert tool["state"] == "aged" and "port = 8431" in tool["rendered"]
        assert tool["call"] and "conf/settings.toml" in tool["call"]
    finally:
        rt.close()


def test_the_default_summary_keeps_the_aged_fact_and_rebuilds(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        sid = _session(rt)
        rt.compact(sid)
        commit = rt.head_commit(sid)
        summaries = [i["rendered"] for i in commit["items"] if i["state"] == "summary"]
        assert summaries and "8431" in summaries[0] and "conf/settings.toml" in summaries[0]
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]
