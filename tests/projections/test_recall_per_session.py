"""``recall_tool`` set per session (``POST /compaction``) overrides the policy both ways.

The budget step and the render both ask ``domain.tool_specs.recall_listed``,
so ``/budget`` and ``/render`` agree for that session; a change makes a new
head commit (the commits already made stay as they were), a rebuild from
the log gives the same tables, and an event recorded before the field
existed projects as "follow the policy".
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from domain.render import SHAPES
from domain.tool_specs import RECALL_SPEC, definition_tokens
from projections.rebuild import rebuild_and_compare
from projections.replay import request_at
from projections.store import ProjectionStore
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.domain.test_recall_spec import names
from tests.projections.test_context_commit import at
from tests.projections.test_drop_in_requests import TOOLS
from tests.projections.test_recall_listed import conversation
from tests.shape_checks import CHECKS


def configure(rt: Runtime, sid: str, recall_tool: bool | None, minute: float = 30) -> None:
    rt.execute("configure_compaction", sid, recall_tool=recall_tool, at=at(minute))


def commit_ids(rt: Runtime, sid: str) -> list[str]:
    return [entry["commit_id"] for entry in rt.timeline(sid)]


def test_on_for_one_session_of_a_policy_off_deployment(rt: Runtime) -> None:
    sid, other = conversation(rt), conversation(rt)
    before = commit_ids(rt, sid)
    saved = rt.commit(sid, before[-1])
    configure(rt, sid, True)
    after = commit_ids(rt, sid)
    assert after[:-1] == before and len(after) == len(before) + 1, "a new head commit"
    assert rt.commit(sid, before[-1]) == saved, "a saved commit is never rewritten"
    assert rt.session_info(sid)["compaction"] == {
        "instructions": None, "summarizer_model": None, "recall_tool": True}  # fmt: skip
    listed = rt.rendered(sid, "neutral")["request"]["tools"]
    assert [t["name"] for t in listed] == ["read_file", "recall", "screenshot"]
    assert rt.budget(sid)["tools"] == definition_tokens(listed)
    assert rt.budget(sid)["commit_id"] == after[-1]
    for shape in SHAPES:
        request = rt.rendered(sid, shape)["request"]
        assert names(request, shape) == ["read_file", "recall", "screenshot"], shape
        if shape in CHECKS:
            CHECKS[shape](request)
    # Another session of the deployment still follows the policy (off).
    assert "recall" not in names(rt.rendered(other, "openai")["request"], "openai")
    assert rt.budget(other)["tools"] == definition_tokens(TOOLS)
    configure(rt, sid, None)  # back to the policy
    assert rt.budget(sid)["tools"] == definition_tokens(TOOLS)
    assert "recall" not in names(rt.rendered(sid, "anthropic")["request"], "anthropic")


def test_off_for_one_session_of_a_policy_on_deployment(rt_recall: Runtime) -> None:
    sid = conversation(rt_recall)
    assert rt_recall.budget(sid)["tools"] == definition_tokens([*TOOLS, RECALL_SPEC])
    configure(rt_recall, sid, False)
    assert rt_recall.budget(sid)["tools"] == definition_tokens(TOOLS)
    for shape in SHAPES:
        assert names(rt_recall.rendered(sid, shape)["request"], shape) == [
            "read_file", "screenshot"], shape  # fmt: skip
    # Instructions alone change no commit and keep the session's choice.
    commits = commit_ids(rt_recall, sid)
    rt_recall.execute("configure_compaction", sid, instructions="Keep paths.",
                      recall_tool=False, at=at(40))  # fmt: skip
    assert commit_ids(rt_recall, sid) == commits
    assert rt_recall.session_info(sid)["compaction"]["recall_tool"] is False


def test_the_guard_counts_the_tool_from_the_next_commit_on(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=True, policy=immediate_policy())
    try:
        sid = conversation(rt, window=3_000)
        configure(rt, sid, True)
        rt.execute("append_node", sid, role="user", input="And part 7?", at=at(31))
        budget = rt.budget(sid)
        assert budget["tools"] == definition_tokens([*TOOLS, RECALL_SPEC])
        assert not budget["over_window"] and budget["request_tokens"] <= budget["limit"]
        rendered = rt.rendered(sid, "openai")
        assert not rendered["over_window"] and "recall" in names(rendered["request"], "openai")
    finally:
        rt.close()


def test_a_rebuild_is_identical_and_replay_renders_what_render_did(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        sid = conversation(rt)
        configure(rt, sid, True)
        version = rt.session_info(sid)["version"]
        live = rt.rendered(sid, "openai")["request"]
        store = ProjectionStore(store_url)
        try:
            assert request_at(rt.app, store, sid, version, "openai") == live
        finally:
            store.engine.dispose()
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_an_event_recorded_before_the_field_existed_follows_the_policy(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy(recall_tool=True))
    try:
        sid = conversation(rt)
        rt.execute("configure_compaction", sid, instructions="Keep paths.", at=at(30))
        app = rt.app
        version = rt.session_info(sid)["version"]
        [new] = app.recorder.select_events(app.session(sid).id, gt=version - 1)
        state = app.mapper.transcoder.decode(new.state)
        del state["recall_tool"]  # as the code before it wrote the event
        old = replace(new, originator_version=version + 1,
                      state=app.mapper.transcoder.encode(state))  # fmt: skip
        app.recorder.insert_events([old])
        assert app.session(sid).compaction["recall_tool"] is None
        info = rt.session_info(sid)
        assert info["version"] == version + 1
        # the row reads as one written before the field existed: a rebuild of an upgraded
        # store gives the very row it holds
        assert info["compaction"] == {"instructions": "Keep paths.", "summarizer_model": None}
        assert rt.budget(sid)["tools"] == definition_tokens([*TOOLS, RECALL_SPEC])
        assert "recall" in names(rt.rendered(sid, "gemini")["request"], "gemini")
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_a_non_boolean_is_refused(rt: Runtime) -> None:
    from domain import errors

    sid = conversation(rt)
    with pytest.raises(errors.InvalidCommand, match="recall_tool"):
        rt.execute("configure_compaction", sid, recall_tool="yes")
