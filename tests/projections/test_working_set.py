"""A process holds the sessions it touches, and lets them go (issue 14).

Every answer must be the same whether a process holds the whole store or
only a session or two at a time, reloading the rest from the projection
tables as it is looked up.
"""

from __future__ import annotations

from typing import Any

from service.runtime import Runtime
from tests.projections.test_context_commit import add, at, start


def busy_store(rt: Runtime) -> list[str]:
    """Sessions that refer to each other: a branch, an attach, a merge."""
    src = start(rt, "source")
    add(rt, src, "user", "their question")
    add(rt, src, "assistant", "their answer", 1)
    sid = start(rt)
    add(rt, sid, "user", "mine")
    fork = add(rt, sid, "assistant", "fork", 1)
    add(rt, sid, "tool", name="grep", input={"q": 1}, output="hit " * 50, minute=1.5)
    peer, _ = rt.execute("attach", sid, src, at=at(2))
    rt.execute("checkout", sid, fork, at=at(3))
    add(rt, sid, "user", "other path", 4)
    rt.execute("merge", sid, [{"node_id": peer}], at=at(6))
    branch, _ = rt.execute("branch", sid, fork, at=at(7))
    add(rt, str(branch), "user", "in the branch", 8)
    add(rt, str(branch), "assistant", "branch answer", 9)
    others = []
    for n in range(4):
        other = start(rt, f"other {n}")
        add(rt, other, "user", f"unrelated {n}", 10 + n)
        others.append(other)
    return [src, sid, str(branch), *others]


def answers(rt: Runtime, sessions: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sid in sessions:
        head = rt.head_commit(sid)
        out[sid] = {
            "head": head,
            "render": rt.rendered(sid, "openai")["request"],
            "budget": rt.budget(sid),
            "info": rt.session_info(sid),
            "explain": [rt.explain(sid, i["source_node_id"]) for i in head["items"]
                        if i["source_node_id"] and ":" not in i["item_id"]],
        }  # fmt: skip
    out["list"] = rt.sessions()
    return out


def test_a_small_working_set_answers_as_the_whole_store_does(store_url: str) -> None:
    writer = Runtime(store_url, working_set=1)  # it lets go of nearly everything, every time
    try:
        sessions = busy_store(writer)
        small = answers(writer, sessions)
    finally:
        writer.close()
    whole = Runtime(store_url, working_set=0)
    try:
        assert answers(whole, sessions) == small
    finally:
        whole.close()


def test_a_fresh_process_loads_only_the_session_it_is_asked_about(store_url: str) -> None:
    writer = Runtime(store_url)
    try:
        sessions = busy_store(writer)
    finally:
        writer.close()
    reader = Runtime(store_url)
    try:
        lonely = sessions[-1]
        reader.rendered(lonely, "openai")
        projector = reader.processor.projector
        assert projector is not None and projector.working is not None
        assert list(projector.working.loaded) == [lonely]
        assert {n.session_id for n in dict.values(projector.dag.nodes)} == {lonely}
        assert len(reader.sessions()) == len(sessions)  # listing needs no nodes
        assert reader.session_info(sessions[1])["counts"]["nodes"] > 0
        assert list(projector.working.loaded) == [lonely, sessions[1]]
    finally:
        reader.close()
