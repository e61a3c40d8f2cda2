"""``explain`` on a summarized item: the summary standing for it in the head,
and the lines of that summary quoting the node (``domain.survived``), through
a fold of folds and after a rebuild, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxstore_client.context_responses import Explanation
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.projections.test_summary_sources import _session


def _survival(rt: Runtime, sid: str) -> dict[str, dict[str, Any]]:
    """Each head item's node: what explain says survived of it (by its first words)."""
    out = {}
    for item in rt.head_commit(sid)["items"]:
        if item["source_node_id"] is None:
            continue  # a summary (folded or not) is no node
        why = rt.explain(sid, item["item_id"])
        Explanation.model_validate(why)  # the answer the client parses
        out[item["rendered"][:20]] = {k: why[k] for k in ("summarized_by", "survived")}
    return out


def test_explain_shows_the_lines_a_summary_kept_of_a_node(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        sid = _session(rt)
        assert all(s == {"summarized_by": None, "survived": []}
                   for s in _survival(rt, sid).values())  # fmt: skip
        summary_id = rt.compact(sid)["summary_id"]
        seen = _survival(rt, sid)
        tool = seen["[tool result: 63 lin"]
        assert tool["summarized_by"] == summary_id
        assert "- tool read_file: port = 8431" in tool["survived"]
        assert "- assistant: Reading settings." not in tool["survived"]
        assert seen["Reading the settings"]["survived"] == ["- assistant: Reading settings."]
        assert seen["Read the settings, t"] == {"summarized_by": None, "survived": []}
        summary = next(i for i in rt.head_commit(sid)["items"] if i["item_id"] == summary_id)
        for kept in tool["survived"]:
            assert kept in summary["rendered"].splitlines()
        answer = json.dumps(rt.explain(sid, _tool_id(rt, sid)), sort_keys=True)
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]
    cold = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        assert json.dumps(cold.explain(sid, _tool_id(cold, sid)), sort_keys=True) == answer
    finally:
        cold.close()


def _tool_id(rt: Runtime, sid: str) -> str:
    return next(str(i["item_id"]) for i in rt.head_commit(sid)["items"]
                if i["rendered"].startswith("[tool result:"))  # fmt: skip


def test_a_fold_of_folds_answers_with_the_summary_the_head_shows(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        sid = _session(rt)
        first = rt.compact(sid)["summary_id"]
        clock = datetime(2026, 4, 2, tzinfo=UTC)
        for n in range(8):
            rt.execute("append_node", sid, role="assistant",
                       output=f"Later step {n}: deploying build {n}07 to stage.",
                       at=clock + timedelta(seconds=n))  # fmt: skip
            rt.execute("append_node", sid, role="user", input=f"Continue with phase {n}.",
                       at=clock + timedelta(seconds=n))  # fmt: skip
        second = rt.compact(sid)
        assert first in second["covered"], "the first summary is folded again"
        seen = _survival(rt, sid)
        tool = seen["[tool result: 63 lin"]
        assert tool["summarized_by"] == second["summary_id"]
        assert "- tool read_file: port = 8431" in tool["survived"]
        assert seen["Later step 0: deploy"]["survived"] == [
            "- assistant: Later step 0: deploying build 007 stage."
        ]
    finally:
        rt.close()
