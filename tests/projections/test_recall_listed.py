"""A deployment with ``recall_tool`` on: every render lists ``recall``, the budget counts it.

``/budget`` and ``/render`` count the same definitions (``domain.tool_specs``),
so the window the rules keep is the window the request needs, ``recall``
included, and a small window still holds its whole request.
"""

from __future__ import annotations

from domain.render import SHAPES
from domain.tool_specs import RECALL_SPEC, definition_tokens
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.domain.test_recall_spec import names
from tests.projections.test_context_commit import add, at, start
from tests.projections.test_drop_in_requests import TOOLS, anthropic_ok, openai_ok
from tests.shape_checks import CHECKS


def conversation(rt: Runtime, window: int | None = None) -> str:
    sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=window, at=at(0))
    sid = str(sid)
    rt.execute("declare_tools", sid, TOOLS, at=at(0))
    add(rt, sid, "system", "You are a careful engineer.")
    for n in range(6):
        add(rt, sid, "user", f"Look at part {n} of the parser. " * 20, 2 * n + 1)
        add(rt, sid, "assistant", f"Reading part {n}.", 2 * n + 1)
        add(rt, sid, "tool", name="read_file", input={"path": f"p{n}.py"}, call_id=f"c{n}",
            output=f"def part_{n}(): ...\n" * 40, minute=2 * n + 2)  # fmt: skip
    return sid


def test_every_shape_lists_recall_and_the_budget_counts_it(rt_recall: Runtime) -> None:
    sid = conversation(rt_recall)
    listed = rt_recall.rendered(sid, "neutral")["request"]["tools"]
    assert [t["name"] for t in listed] == ["read_file", "recall", "screenshot"]
    assert RECALL_SPEC in listed
    assert rt_recall.budget(sid)["tools"] == definition_tokens(listed)
    assert definition_tokens(listed) == definition_tokens([*TOOLS, RECALL_SPEC])
    for shape in SHAPES:
        request = rt_recall.rendered(sid, shape)["request"]
        assert names(request, shape) == ["read_file", "recall", "screenshot"], shape
        if shape in CHECKS:
            CHECKS[shape](request)
    anthropic_ok(rt_recall.rendered(sid, "anthropic")["request"])
    openai_ok(rt_recall.rendered(sid, "openai")["request"])


def test_off_by_default_nothing_is_listed(rt: Runtime) -> None:
    sid = start(rt)
    rt.execute("declare_tools", sid, TOOLS, at=at(0))
    add(rt, sid, "user", "hello", 1)
    for shape in SHAPES:
        assert "recall" not in names(rt.rendered(sid, shape)["request"], shape)
    assert rt.budget(sid)["tools"] == definition_tokens(TOOLS)


def test_a_small_window_holds_the_request_with_recall_listed(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=True, policy=immediate_policy(recall_tool=True))
    try:
        sid = conversation(rt, window=3_000)
        budget = rt.budget(sid)
        assert budget["tools"] == definition_tokens([*TOOLS, RECALL_SPEC])
        assert not budget["over_window"]
        states = {i["state"] for i in rt.head_commit(sid)["items"]}
        assert "summarized" in states, "the history had to fold to fit"
        assert budget["request_tokens"] <= budget["limit"]
        rendered = rt.rendered(sid, "openai")
        assert not rendered["over_window"] and "recall" in names(rendered["request"], "openai")
    finally:
        rt.close()
