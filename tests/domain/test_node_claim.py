"""A node id is unique in its session, and a clash there stores nothing.

Two sessions may both number their nodes ``call_0``, ``call_1`` (a model's
own ids, a deterministic agent run twice, two tenants that must not learn
each other's ids from a 409).  Inside a session an id names one node, and a
branch may not reuse an id of the history it shows.  These run the real
event store; the racing case uses two application instances, as two API
processes would be.
"""

from __future__ import annotations

from typing import Any

import pytest

from domain import errors
from domain.application import CtxStore
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime


def turn(app: CtxStore, sid: Any, prefix: str = "") -> None:
    app.append_node(sid, role="user", node_id=f"{prefix}u", input="list the files")
    app.append_node(sid, role="assistant", node_id=f"{prefix}call_0", output="calling")
    app.append_node(sid, role="tool", node_id=f"{prefix}call_1", call_id="call_1",
                    name="ls", output="a.txt")  # fmt: skip


def test_two_sessions_both_use_the_same_node_ids(app: CtxStore, store_url: str) -> None:
    a, _ = app.start_session()
    b, _ = app.start_session()
    turn(app, a)
    turn(app, b)  # a second run of the same deterministic agent
    with pytest.raises(errors.DuplicateNode) as refused:
        app.append_node(b, role="user", node_id="u")  # within a session: still refused
    assert refused.value.code == "duplicate_node"
    rt = Runtime(store_url, auto_compact=False)
    try:
        rt.catch_up()
        for sid in (a, b):
            head = rt.head_commit(str(sid))
            assert head["head_node_id"] == "call_1"
            assert [i["item_id"] for i in head["items"]] == ["u", "call_0", "call_1"]
            nodes = rt.branch_nodes(str(sid))["nodes"]
            assert {n["session_id"] for n in nodes} == {str(sid)}
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_two_tenants_both_use_the_same_node_id(app: CtxStore) -> None:
    """A 409 on an id another tenant holds would tell one tenant the other's ids."""
    mine, _ = app.start_session(tenant="acme")
    theirs, _ = app.start_session(tenant="globex")
    app.append_node(theirs, role="user", node_id="merger-plan", tenant="globex")
    node, _ = app.append_node(mine, role="user", node_id="merger-plan", tenant="acme")
    assert node == "merger-plan"


def test_a_branch_cannot_reuse_an_id_of_its_source(app: CtxStore) -> None:
    source, _ = app.start_session()
    app.append_node(source, role="user", node_id="u1")
    app.append_node(source, role="assistant", node_id="a1")
    branch, _ = app.branch(source, "a1")
    deeper, _ = app.branch(branch, "a1")  # branched at the same point, one level further
    for sid in (branch, deeper):
        for node_id in ("u1", "a1"):
            with pytest.raises(errors.DuplicateNode):
                app.append_node(sid, role="user", node_id=node_id)
    with pytest.raises(errors.DuplicateNode):  # a retry's new version is a node too
        app.add_sibling(source, of="a1", kind="retry", node_id="u1", output="again")


def test_a_branch_and_its_source_may_both_add_an_id_after_the_branch_point(
    app: CtxStore, store_url: str
) -> None:
    source, _ = app.start_session()
    app.append_node(source, role="user", node_id="u1", input="question")
    app.append_node(source, role="assistant", node_id="a1", output="answer")
    branch, _ = app.branch(source, "a1")
    app.append_node(source, role="user", node_id="u2", input="the source goes on")
    app.append_node(branch, role="user", node_id="u2", input="the branch goes elsewhere")
    app.append_node(branch, role="assistant", node_id="a2", output="calling")
    app.append_node(branch, role="tool", node_id="t1", name="ls", output="x")
    rt = Runtime(store_url, auto_compact=False)
    try:
        rt.catch_up()
        shown = {i["item_id"]: i for i in rt.head_commit(str(branch))["items"]}
        assert list(shown) == ["u1", "a1", "u2", "a2", "t1"]
        rendered = rt.rendered(str(branch), "openai")["request"]["messages"]
        assert "the branch goes elsewhere" in str(rendered)
        assert "the source goes on" not in str(rendered)
        assert [n["node_id"] for n in rt.branch_nodes(str(source))["nodes"]] == ["u1", "a1", "u2"]
        explained = rt.explain(str(branch), "u2")
        assert explained["current"]["item_id"] == "u2"
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_a_claim_lost_to_a_racing_writer_stores_nothing(
    app: CtxStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both writers validate; the event store's key decides at save, and says why."""
    other = CtxStore(url=store_url)
    try:
        a, _ = app.start_session()
        app.append_node(a, role="user", node_id="first")
        save = app._save
        raced: list[str] = []

        def late(agg: Any, added: Any = ()) -> None:
            if added and not raced:  # the other process takes the id just before our save
                raced.append(added[0])
                other.append_node(a, role="user", node_id=added[0], predecessor="first")
            save(agg, added)

        monkeypatch.setattr(app, "_save", late)
        with pytest.raises(errors.DuplicateNode):
            app.append_node(a, role="user", node_id="contested", predecessor="first",
                            expected_version=2)  # fmt: skip
        assert raced == ["contested"]
        assert [e.node_id for e in app.session_events(a)[1:]] == ["first", "contested"]
    finally:
        other.close()
