"""ContextCommit projection, example by example, on SQLite and PostgreSQL.

Commands go through a real ``Runtime`` with explicit event times; the
projection is read back through its queries (``head_commit``, ``timeline``,
``explain``).  Merges are in ``test_merge.py``, crash safety in
``test_crash_safety.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from domain import errors
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.conftest import immediate_policy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MODEL = "openai:gpt-4o"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def start(rt: Runtime, title: str = "t", model: str = MODEL) -> str:
    sid, _ = rt.execute("start_session", title, model, at=T0)
    return str(sid)


def add(rt: Runtime, sid: str, role: str, text: Any = None, minute: float = 0,
        **kw: Any) -> str:  # fmt: skip
    field = "input" if role in ("user", "system") else "output"
    kw.setdefault(field, text if text is not None else f"{role} text")
    node, _ = rt.execute("append_node", sid, role=role, at=at(minute), **kw)
    return str(node)


def items(rt: Runtime, sid: str) -> list[dict[str, Any]]:
    return list(rt.head_commit(sid)["items"])


def ids(rt: Runtime, sid: str) -> list[str]:
    return [i["item_id"] for i in items(rt, sid)]


def by_id(rt: Runtime, sid: str) -> dict[str, dict[str, Any]]:
    return {i["item_id"]: i for i in items(rt, sid)}


# ------------------------------------------------------------ incremental


def test_each_commit_builds_on_the_previous_heads_commit(rt: Runtime) -> None:
    sid = start(rt)
    nodes = [add(rt, sid, "system", "be brief"), add(rt, sid, "user", "hi", 1)]
    nodes += [add(rt, sid, "assistant", "hello", 2)]
    nodes += [add(rt, sid, "tool", name="grep", input={"q": "x"}, minute=3)]
    nodes += [add(rt, sid, "assistant", "found it", 4)]
    line = rt.timeline(sid)
    assert [c["head_node_id"] for c in line] == nodes
    assert line[0]["parent_ids"] == []
    for parent, child in zip(line, line[1:], strict=False):
        assert child["parent_ids"] == [parent["commit_id"]]
    head = rt.head_commit(sid)
    assert head["id"] == line[-1]["commit_id"]
    assert [i["source_node_id"] for i in head["items"]] == nodes
    assert head["rules_version"] == rt.policy.rules_version
    assert head["event_id"] == f"{sid}:{head['event_seq']}"


def test_every_tool_under_one_assistant_is_visible(rt: Runtime) -> None:
    sid = start(rt)
    add(rt, sid, "user", "look around")
    caller = add(rt, sid, "assistant", "three calls", 1)
    tools = [add(rt, sid, "tool", name=f"t{n}", input={"n": n}, output=f"r{n}", minute=2)
             for n in range(3)]  # fmt: skip
    assert ids(rt, sid)[-3:] == tools
    nxt = add(rt, sid, "assistant", "all read", 3)
    assert ids(rt, sid)[-5:] == [caller, *tools, nxt]
    uses = [b["id"] for m in rt.rendered(sid, "anthropic")["request"]["messages"]
            for b in m["content"] if b["type"] == "tool_use"]  # fmt: skip
    assert uses == tools


def test_a_tool_retry_replaces_the_older_version(rt: Runtime) -> None:
    sid = start(rt)
    add(rt, sid, "user", "go")
    caller = add(rt, sid, "assistant", "two calls", 1)
    first = add(rt, sid, "tool", name="read", input={"f": 1}, output="old", minute=2)
    second = add(rt, sid, "tool", name="read", input={"f": 2}, output="two", minute=2)
    after = add(rt, sid, "assistant", "thinking", 3)
    retry, _ = rt.execute(
        "add_sibling", sid, of=first, kind="retry", input={"f": 1}, output="old", at=at(4)
    )
    assert [n["version_kind"] for n in rt.dag(sid)["nodes"] if n["node_id"] == retry] == ["retry"]
    view = by_id(rt, sid)
    assert retry in view and first not in view and second in view
    assert after not in view, "the retry's head does not see later turns"
    assert rt.head_commit(sid)["parent_ids"] == [rt.timeline(sid)[1]["commit_id"]]
    assert caller in view
    # back on the old path, the next commit sees the newest version of the call
    rt.execute("checkout", sid, after, at=at(5))
    add(rt, sid, "user", "continue", 6)
    view = by_id(rt, sid)
    assert retry in view and first not in view and second in view and after in view


def test_an_edit_of_a_message_is_a_sibling_with_its_own_commit(rt: Runtime) -> None:
    sid = start(rt)
    question = add(rt, sid, "user", "first wording")
    answer = add(rt, sid, "assistant", "answer", 1)
    edit, _ = rt.execute(
        "add_sibling", sid, of=question, kind="edit", input="second wording", at=at(2)
    )
    assert ids(rt, sid) == [edit]
    rt.execute("checkout", sid, answer, at=at(3))
    assert ids(rt, sid) == [question, answer]


# ------------------------------------------------------------------ branch


def test_a_branch_sessions_first_commit_includes_the_source_chain(rt: Runtime) -> None:
    src = start(rt, "source")
    chain = [add(rt, src, "system", "sys"), add(rt, src, "user", "q", 1)]
    chain += [add(rt, src, "assistant", "a1", 2)]
    later_tool = add(rt, src, "tool", name="grep", input={}, output="hit", minute=3)
    later = add(rt, src, "assistant", "a2", 4)
    branch, _ = rt.execute("branch", src, chain[-1], at=at(5))
    own = add(rt, str(branch), "user", "in the branch", 6)
    head = rt.head_commit(str(branch))
    assert [i["item_id"] for i in head["items"]] == [*chain, own]
    assert later_tool not in ids(rt, str(branch)) and later not in ids(rt, str(branch))
    source_commit = {c["head_node_id"]: c["commit_id"] for c in rt.timeline(src)}[chain[-1]]
    assert head["parent_ids"] == [source_commit]
    assert head["session_id"] == str(branch)
    assert items(rt, str(branch))[1]["is_anchor"], "the source's first user is still an anchor"


def test_commands_on_a_branch_leave_the_source_sessions_commits_alone(rt: Runtime) -> None:
    """A branch at a source node pins and switches models in its own commits only."""
    src = start(rt, "source")
    user = add(rt, src, "user", "q")
    answer = add(rt, src, "assistant", "a", 1)
    source_head = rt.head_commit(src)
    branch = str(rt.execute("branch", src, answer, at=at(2))[0])
    rt.execute("pin", branch, answer, at=at(3))
    rt.execute("switch_model", branch, "anthropic:claude-sonnet-4", at=at(4))
    assert rt.head_commit(src) == source_head, "the source's view did not move"
    mine = rt.head_commit(branch)
    assert mine["session_id"] == branch and mine["parent_ids"] != []
    assert by_id(rt, branch)[answer]["locked"] and not by_id(rt, src)[answer]["locked"]
    nxt = add(rt, src, "user", "next", 5)  # the source builds on its own commit, unpinned
    assert rt.head_commit(src)["parent_ids"] == [source_head["id"]]
    assert not by_id(rt, src)[answer]["locked"] and ids(rt, src) == [user, answer, nxt]
    own = add(rt, branch, "user", "in the branch", 6)  # the branch builds on its own
    assert by_id(rt, branch)[answer]["locked"] and ids(rt, branch) == [user, answer, own]
    nested = str(rt.execute("branch", branch, answer, at=at(7))[0])
    assert by_id(rt, nested)[answer]["locked"], "a branch of the branch sees the branch's pin"


# ------------------------------------------------------------------ attach


def test_attach_copies_the_source_commit_between_markers(rt: Runtime) -> None:
    src = start(rt, "source")
    question = add(rt, src, "user", "their question")
    add(rt, src, "assistant", "their answer", 1)
    sid = start(rt)
    add(rt, sid, "user", "mine", 2)
    node, _ = rt.execute("attach", sid, src, at=at(3))
    block = [i for i in items(rt, sid) if i["attached_from"]]
    assert [i["role"] for i in block] == ["marker", "user", "assistant", "marker"]
    assert block[1]["item_id"] == f"{node}:{question}"
    assert not block[1]["is_anchor"]
    rt.execute("attach", sid, src, at=at(4))
    assert sum(1 for i in items(rt, sid) if i["attached_from"]) == 4, "same source: once"


def test_attaches_nested_five_deep_keep_long_item_ids_auditable(rt: Runtime) -> None:
    """Each level prefixes the copied ids; the audit rows must hold them all."""
    sid = level0 = start(rt, "level 0")
    add(rt, sid, "user", "q")
    add(rt, sid, "assistant", "calling", 1)
    tool = add(rt, sid, "tool", name="grep", input={}, output="hit\n" * 50, minute=2,
               node_id="t" * 64)  # fmt: skip
    for level in range(1, 6):
        outer = start(rt, f"level {level}")
        add(rt, outer, "user", f"look at level {level - 1}", 3 * level)
        rt.execute("attach", outer, sid, at=at(3 * level + 1))
        sid = outer
    # another lineage's node: the copies name it by key
    tool = f"{level0}/{tool}"
    copied = [i for i in items(rt, sid) if i["source_node_id"] == tool]
    assert len(copied) == 1 and len(copied[0]["item_id"]) > 160
    for turn in range(6):  # the copied tool leaves the tail window and ages
        add(rt, sid, "assistant", f"turn {turn}", 20 + turn)
    (aged,) = [i for i in items(rt, sid) if i["source_node_id"] == tool]
    assert aged["state"] == "aged"
    history = rt.explain(sid, tool)
    assert any(t["to_state"] == "aged" for t in history["transitions"])


def test_attach_falls_back_to_one_user_item_when_the_source_cannot_be_loaded(
    rt: Runtime,
) -> None:
    src = start(rt, "source")
    sid = start(rt)
    add(rt, sid, "user", "mine")
    # An AttachStaged whose commit and source head have no commit in the projection.
    node, _ = rt.app._command(sid, None, lambda s: s.stage_attach(src, "ghost-head", None, at(1)))
    rt.catch_up()
    [fallback] = [i for i in items(rt, sid) if i["attached_from"]]
    assert fallback["item_id"] == f"{node}:fallback"
    assert (fallback["role"], fallback["state"]) == ("user", "full")
    assert fallback["attached_from"] == f"{src}:ghost-head"
    assert "could not be loaded" in fallback["rendered"]
    texts = [m["content"] for m in rt.rendered(sid, "openai")["request"]["messages"]]
    assert any("could not be loaded" in t for t in texts if isinstance(t, str))


# ----------------------------------------------------------------- summary


def test_a_recorded_summary_folds_its_run_and_sits_after_it(rt: Runtime) -> None:
    sid = start(rt)
    add(rt, sid, "system", "sys")
    add(rt, sid, "user", "task", 1)
    run = [add(rt, sid, "assistant", "a1", 2)]
    run += [add(rt, sid, "tool", name="ls", output="x", minute=3)]
    run += [add(rt, sid, "assistant", "a2", 4)]
    for minute in range(5, 9):
        add(rt, sid, "assistant", f"turn {minute}", minute)
    commit = rt.head_commit(sid)["id"]
    summary, _ = rt.execute("record_summary", sid, covered=run, text="did a1 and a2",
                            summarizer="test", commit=commit, at=at(10))  # fmt: skip
    head = rt.head_commit(sid)
    assert head["parent_ids"] == [commit]
    order = [i["item_id"] for i in head["items"]]
    assert order.index(summary) == order.index(run[-1]) + 1
    view = {i["item_id"]: i for i in head["items"]}
    assert view[summary]["rendered"] == "[Summary] did a1 and a2"
    assert view[summary]["state"] == "summary"
    for item_id in run:
        assert (view[item_id]["state"], view[item_id]["merged_into"]) == ("summarized", summary)
    rendered = rt.rendered(sid, "neutral")["request"]["messages"]
    assert rendered[0]["content"][1]["text"] == "[Summary] did a1 and a2"  # with the task
    assert head["total_tokens"] < rt.commit(sid, commit)["total_tokens"]


# ----------------------------------------------------------------- explain


def test_explain_returns_the_whole_transition_history(store_url: str) -> None:
    policy = immediate_policy(tail_turns=1)
    rt = Runtime(store_url, policy=policy, auto_compact=False)
    try:
        sid = start(rt)
        add(rt, sid, "user", "task")
        add(rt, sid, "assistant", "reading", 1)
        tool = add(rt, sid, "tool", name="cat", input={"f": "big"}, output="L\n" * 3000, minute=2)
        add(rt, sid, "assistant", "a2", 3)
        add(rt, sid, "assistant", "a3", 4)
        add(rt, sid, "assistant", "a4", 70)
        out = rt.explain(sid, tool)
        rows = out["transitions"]
        assert [(r["rule"], r["from_state"], r["to_state"]) for r in rows] == [
            ("per_item_cap", "full", "full"),
            ("tool_aging", "full", "aged"),
            ("idle_clearing", "aged", "cleared"),
        ]
        assert rows[0]["inputs"] == "result 6000 chars > cap 4000; cut 2000"
        assert rows[1]["inputs"] == "assistant turns since: 2 > tail 1"
        assert rows[2]["inputs"] == "untouched for 68.0 min ≥ 60 min"
        commits = {c["commit_id"]: c for c in rt.timeline(sid)}
        for row in rows:
            assert row["rules_version"] == policy.rules_version
            assert row["item_id"] == tool
            assert row["event_id"] == f"{sid}:{row['event_seq']}"
            assert commits[row["commit_id"]]["event_seq"] == row["event_seq"]
        assert [r["event_seq"] for r in rows] == sorted({r["event_seq"] for r in rows})
        assert out["current"]["state"] == "cleared"
        assert out["current"]["reason"] == "untouched for 68.0 min ≥ 60 min"
    finally:
        rt.close()


def test_explain_refuses_a_node_of_an_unrelated_session(rt: Runtime) -> None:
    """It answered 200 with an empty history, as if the node were in the session."""
    sid, other = start(rt), start(rt)
    own = add(rt, sid, "user", "mine")
    foreign = add(rt, other, "user", "theirs")
    with pytest.raises(errors.NodeNotFound):
        rt.explain(sid, foreign)
    assert rt.explain(sid, own)["current"]["state"] == "full"
    branch, _ = rt.execute("branch", sid, own)
    assert rt.explain(str(branch), own)["node_id"] == own  # a branch sees its source's nodes


def test_a_rendered_commit_is_the_same_from_a_warm_and_a_cold_process(
    rt: Runtime, store_url: str
) -> None:
    """The request names the session's model; a cache must not keep an older one."""
    sid = start(rt)
    add(rt, sid, "user", "task")
    commit = rt.head_commit(sid)["id"]
    rt.rendered(sid, "openai", commit)  # warm the cache
    rt.execute("switch_model", sid, "openai:gpt-5", at=at(1))
    warm = rt.rendered(sid, "openai", commit)
    cold = Runtime(store_url, auto_compact=False)
    try:
        assert warm == cold.rendered(sid, "openai", commit)
        assert warm["request"]["model"] == "gpt-5"
    finally:
        cold.close()


def test_a_summary_never_folds_an_item_pinned_after_the_heads_commit(rt: Runtime) -> None:
    """Checkout back to a head whose commit predates a pin, then compact there."""
    sid = start(rt)
    add(rt, sid, "system", "be helpful")
    add(rt, sid, "user", "task", 1)
    add(rt, sid, "assistant", "reading", 2, node_id="a1")
    add(rt, sid, "tool", name="read_file", input={"p": 1}, output="important\n" * 50,
        minute=3, node_id="t1")  # fmt: skip
    add(rt, sid, "assistant", "noted", 4, node_id="a2")
    for k in range(3, 7):
        add(rt, sid, "assistant", f"turn {k}", 5, node_id=f"a{k}")
    add(rt, sid, "user", "go on", 5, node_id="u2")
    rt.execute("pin", sid, "t1", at=at(6))
    rt.execute("checkout", sid, "a6", at=at(7))  # a6's commit predates the pin
    rt.compact(sid)  # the request comes from a6's commit, where t1 was not yet locked
    t1 = by_id(rt, sid)["t1"]
    assert t1["locked"] and t1["state"] != "summarized"
    assert all(r["to_state"] != "summarized" for r in rt.explain(sid, "t1")["transitions"])


def test_a_tool_appended_with_an_earlier_calls_id_replaces_it(rt: Runtime) -> None:
    """Same result on the fast path (right after the call) as on any other path."""
    sid = start(rt)
    add(rt, sid, "user", "task", node_id="u1")
    add(rt, sid, "assistant", "calling", 1, node_id="a1")
    add(rt, sid, "tool", name="bash", input={"cmd": "ls"}, output="v1", minute=2,
        call_id="c1", node_id="t1")  # fmt: skip
    add(rt, sid, "tool", name="bash", input={"cmd": "ls"}, output="v2", minute=3,
        call_id="c1", node_id="t2")  # fmt: skip
    assert ids(rt, sid) == ["u1", "a1", "t2"]
    add(rt, sid, "user", "next", 4, node_id="u2")
    rt.execute(
        "add_sibling", sid, of="u2", kind="edit", input="next (edited)", node_id="u2b", at=at(5)
    )
    assert ids(rt, sid) == ["u1", "a1", "t2", "u2b"]


def _unpinned_inside_a_shortened_tail(store_url: str, restart: bool) -> str:
    """A summary moves the tail boundary back; a tool unpinned then must age later."""
    policy = immediate_policy(tail_turns=2)
    rt = Runtime(store_url, policy=policy, auto_compact=False)
    try:
        sid = start(rt)
        add(rt, sid, "user", "task", node_id="u1")
        add(rt, sid, "assistant", "reading", 1, node_id="a1")
        add(rt, sid, "tool", name="read_file", input={"p": 1}, output="x\n" * 40, minute=1,
            node_id="t1")  # fmt: skip
        rt.execute("pin", sid, "t1", at=at(1))
        for k in range(2, 6):
            add(rt, sid, "assistant", f"turn {k}", k, node_id=f"a{k}")
        rt.execute("record_summary", sid, ["a2", "a3"], "turns 2-3", "manual",
                   rt.head_commit(sid)["id"], at=at(6))  # fmt: skip
        rt.execute("unpin", sid, "t1", at=at(7))
        if restart:  # a fresh process loads the head's context from stored rows
            rt.close()
            rt = Runtime(store_url, policy=policy, auto_compact=False)
        add(rt, sid, "assistant", "turn 6", 8, node_id="a6")
        add(rt, sid, "assistant", "turn 7", 9, node_id="a7")
        return str(by_id(rt, sid)["t1"]["state"])
    finally:
        rt.close()


def test_a_warm_and_a_restarted_process_age_the_same_tools(tmp_path: Any) -> None:
    states = {}
    for restart in (False, True):
        url = f"sqlite:///{tmp_path}/restart_{restart}.db"
        states[restart] = _unpinned_inside_a_shortened_tail(url, restart)
        assert rebuild_and_compare(url)["identical"]
    assert states == {False: "aged", True: "aged"}, "four turns after it, tail 2"
