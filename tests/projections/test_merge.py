"""Merges: several parents, a locked base, and what later commits keep.

Runs on SQLite and PostgreSQL through a real ``Runtime`` (helpers shared
with ``test_context_commit.py``).
"""

from __future__ import annotations

from domain.context import tightens
from domain.policy import Policy
from service.runtime import Runtime
from tests.projections.test_context_commit import add, at, by_id, ids, items, start


def two_heads(rt: Runtime) -> tuple[str, dict[str, str]]:
    sid = start(rt)
    n = {"user": add(rt, sid, "user", "task")}
    n["a1"] = add(rt, sid, "assistant", "plan", 1)
    n["peer_a"] = add(rt, sid, "assistant", "peer attempt", 2, predecessor=n["a1"])
    n["peer_t"] = add(rt, sid, "tool", name="grep", input={"q": 1}, output="hit", minute=3)
    rt.execute("checkout", sid, n["a1"], at=at(4))
    n["base"] = add(rt, sid, "user", "base path", 5)
    return sid, n


def test_a_merge_commit_shows_the_base_as_it_stood_and_has_several_parents(
    rt: Runtime,
) -> None:
    sid, n = two_heads(rt)
    commits = {c["head_node_id"]: c["commit_id"] for c in rt.timeline(sid)}
    merge, _ = rt.execute("merge", sid, [{"node_id": n["peer_t"]}], at=at(6))
    head = rt.head_commit(sid)
    assert head["head_node_id"] == merge
    assert head["parent_ids"] == [commits[n["base"]], commits[n["peer_t"]]]
    view = {i["item_id"]: i for i in head["items"]}
    assert list(view) == [n["user"], n["a1"], n["base"], n["peer_a"], n["peer_t"]]
    base = {i["item_id"]: i for i in rt.commit(sid, commits[n["base"]])["items"]}
    for key in ("user", "a1", "base"):
        assert view[n[key]] == base[n[key]], "frozen for the merge commit: as the base had it"
        assert not view[n[key]]["locked"], "but not locked: it compacts from the next commit"
    add(rt, sid, "assistant", "merged", 7)
    assert len(rt.head_commit(sid)["parent_ids"]) == 1


def test_legacy_rules_lock_the_base_for_good(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=Policy(generation=1))
    try:
        sid, n = two_heads(rt)
        rt.execute("merge", sid, [{"node_id": n["peer_t"]}], at=at(6))
        view = by_id(rt, sid)
        for key in ("user", "a1", "base"):
            assert view[n[key]]["locked"] and view[n[key]]["base_locked"]
        add(rt, sid, "assistant", "merged", 7)
        after = by_id(rt, sid)
        assert after[n["base"]]["base_locked"] and not after[n["peer_t"]]["locked"]
    finally:
        rt.close()


def test_an_edit_after_a_merge_keeps_the_peers_items(rt: Runtime) -> None:
    sid, n = two_heads(rt)
    rt.execute("merge", sid, [{"node_id": n["peer_t"]}], at=at(6))
    later = add(rt, sid, "assistant", "merged", 7)
    before = set(ids(rt, sid)) - {later}
    edit, _ = rt.execute(
        "add_sibling", sid, of=later, kind="edit", output="merged, reworded", at=at(8)
    )
    assert set(ids(rt, sid)) == before | {edit}


def test_a_merge_does_not_expand_the_same_attach_twice(rt: Runtime) -> None:
    src = start(rt, "source")
    add(rt, src, "user", "their question")
    sid = start(rt)
    add(rt, sid, "user", "mine")
    fork = add(rt, sid, "assistant", "fork", 1)
    peer, _ = rt.execute("attach", sid, src, at=at(2))
    rt.execute("checkout", sid, fork, at=at(3))
    add(rt, sid, "user", "other path", 4)
    rt.execute("attach", sid, src, at=at(5))
    rt.execute("merge", sid, [{"node_id": peer}], at=at(6))
    opens = [i for i in items(rt, sid) if i["item_id"].endswith(":open")]
    assert len(opens) == 1


def test_a_merge_brings_no_empty_attach_block(rt: Runtime) -> None:
    """The peer staged an older head of a source the base staged whole: nothing is new."""
    src = start(rt, "source")
    add(rt, src, "user", "their question")
    older = add(rt, src, "assistant", "their answer", 1)
    add(rt, src, "user", "their follow-up", 2)
    sid = start(rt)
    add(rt, sid, "user", "mine")
    fork = add(rt, sid, "assistant", "fork", 1)
    peer, _ = rt.execute("attach", sid, src, older, at=at(2))
    rt.execute("checkout", sid, fork, at=at(3))
    add(rt, sid, "user", "other path", 4)
    rt.execute("attach", sid, src, at=at(5))  # the source's latest head: all of it
    rt.execute("merge", sid, [{"node_id": peer}], at=at(6))
    markers = [i["item_id"] for i in items(rt, sid) if i["role"] == "marker"]
    assert len(markers) == 2, markers  # one open and one close: the base's block only


def test_a_merge_never_loosens_an_item_the_peer_had_aged(rt: Runtime) -> None:
    sid = start(rt)
    add(rt, sid, "user", "task")
    caller = add(rt, sid, "assistant", "two calls", 1)
    tools = [add(rt, sid, "tool", name="grep", output=f"hit {n}", minute=2) for n in range(2)]
    for minute in range(3, 7):
        peer = add(rt, sid, "assistant", f"turn {minute}", minute)
    peer_view = by_id(rt, sid)
    assert [peer_view[t]["state"] for t in tools] == ["aged", "aged"]
    rt.execute("checkout", sid, caller, at=at(7))
    rt.execute("merge", sid, [{"node_id": peer}], at=at(8))
    merged = by_id(rt, sid)
    for tool in tools:
        assert tightens(peer_view[tool]["state"], merged[tool]["state"]), merged[tool]
