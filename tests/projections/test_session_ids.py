"""Attach and merge across sessions that use the same node ids.

Node ids are unique only in their session, so another lineage's ``call_0``
is another node: brought in by an attach or a merge it is named by key
(``session/node id``), never mistaken for the target's own ``call_0``, and
the rendered request still names each tool call once.
"""

from __future__ import annotations

from typing import Any

import pytest

from domain import errors
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.projections.test_context_commit import add, at, items, start
from tests.spies import calls_of


def agent_run(rt: Runtime, sid: str, task: str, minute: float = 0) -> None:
    """One turn of a deterministic agent: the same ids every run."""
    add(rt, sid, "user", task, minute, node_id="u")
    add(rt, sid, "assistant", f"calling for {task}", minute + 1, node_id="call_0")
    add(rt, sid, "tool", name="ls", input={"task": task}, output=f"files of {task}",
        minute=minute + 2, node_id="call_1", call_id="call_1")  # fmt: skip


def tool_ids(request: dict[str, Any]) -> list[str]:
    out = []
    for message in request["messages"]:
        out += [call["id"] for call in message.get("tool_calls") or []]
    return out


def test_an_attach_of_a_session_with_the_same_ids_copies_its_own_nodes(
    rt: Runtime, store_url: str
) -> None:
    theirs = start(rt, "theirs")
    agent_run(rt, theirs, "theirs")
    mine = start(rt, "mine")
    agent_run(rt, mine, "mine")
    node, _ = rt.execute("attach", mine, theirs, at=at(10))
    block = [i for i in items(rt, mine) if i["attached_from"]]
    assert [i["role"] for i in block] == ["marker", "user", "assistant", "tool", "marker"]
    assert [i["item_id"] for i in block[1:4]] == [f"{node}:u", f"{node}:call_0", f"{node}:call_1"]
    assert [i["source_node_id"] for i in block[1:4]] == [f"{theirs}/{n}" for n in
                                                         ("u", "call_0", "call_1")]  # fmt: skip
    own = [i["item_id"] for i in items(rt, mine) if not i["attached_from"]]
    assert own[:3] == ["u", "call_0", "call_1"]
    text = str(rt.rendered(mine, "openai")["request"])
    assert "files of theirs" in text and "files of mine" in text
    explained = rt.explain(mine, f"{theirs}/call_1")
    assert explained["current"]["item_id"] == f"{node}:call_1"
    assert rt.explain(mine, "call_1")["current"]["item_id"] == "call_1"
    assert rebuild_and_compare(store_url)["identical"]


def test_a_merge_of_two_branches_that_both_used_an_id(rt: Runtime, store_url: str) -> None:
    """Both branches numbered their calls alike after the branch point; the merge keeps
    the shared history once and both branches' own nodes, the peer's by key."""
    source = start(rt, "source")
    add(rt, source, "user", "shared task", node_id="task")
    point = add(rt, source, "assistant", "plan", 1, node_id="plan")
    left = str(rt.execute("branch", source, point, at=at(2))[0])
    right = str(rt.execute("branch", source, point, at=at(2))[0])
    agent_run(rt, left, "left", 3)
    agent_run(rt, right, "right", 3)
    rt.execute("merge", left, [{"session_id": right, "node_id": "call_1"}], at=at(10))
    merged = [i["item_id"] for i in items(rt, left)]
    assert merged == ["task", "plan", "u", "call_0", "call_1",
                      f"{right}/u", f"{right}/call_0", f"{right}/call_1"]  # fmt: skip
    request = rt.rendered(left, "openai")["request"]
    text = str(request)
    assert "files of left" in text and "files of right" in text
    calls = tool_ids(request)
    assert len(calls) == 2 and len(set(calls)) == 2, "one call id per call"
    add(rt, left, "assistant", "both done", 11)
    assert f"{right}/call_1" in [i["item_id"] for i in items(rt, left)]
    assert rebuild_and_compare(store_url)["identical"]


def test_a_merge_back_into_the_source_shares_the_history(rt: Runtime, store_url: str) -> None:
    source = start(rt, "source")
    add(rt, source, "user", "task", node_id="task")
    add(rt, source, "assistant", "plan", 1, node_id="plan")
    branch = str(rt.execute("branch", source, "plan", at=at(2))[0])
    add(rt, source, "user", "source goes on", 3, node_id="u")
    add(rt, branch, "user", "branch goes on", 3, node_id="u")
    rt.execute("merge", source, [{"session_id": branch, "node_id": "u"}], at=at(4))
    assert [i["item_id"] for i in items(rt, source)] == ["task", "plan", "u", f"{branch}/u"]
    assert rebuild_and_compare(store_url)["identical"]


def test_another_sessions_node_is_not_explained_where_it_was_never_brought(rt: Runtime) -> None:
    """``theirs/call_1`` names their node, not mine of the same id: until an attach or a
    merge brings it in, my session has nothing to say about it."""
    theirs = start(rt, "theirs")
    agent_run(rt, theirs, "theirs")
    mine = start(rt, "mine")
    agent_run(rt, mine, "mine")
    for turn in range(6):  # my own call_1 leaves the tail window: it has a history
        add(rt, mine, "assistant", f"turn {turn}", 5 + turn)
    assert rt.explain(mine, "call_1")["transitions"]
    with pytest.raises(errors.NodeNotFound):
        rt.explain(mine, f"{theirs}/call_1")
    assert rt.explain(mine, "call_1")["current"]["item_id"] == "call_1"
    assert rt.explain(theirs, f"{theirs}/call_1")["current"]["item_id"] == "call_1"
    node, _ = rt.execute("attach", mine, theirs, at=at(10))
    assert rt.explain(mine, f"{theirs}/call_1")["current"]["item_id"] == f"{node}:call_1"


def test_a_render_loads_the_commits_items_once(rt: Runtime, monkeypatch: Any) -> None:
    """The request and its window check read the same items (issue 15: it loaded twice)."""
    sid = start(rt, "render")
    agent_run(rt, sid, "render")
    loads = calls_of(monkeypatch, rt.processor.projector_of(sid), "items_of")
    rt.rendered(sid, "openai")
    assert len(loads) == 1
