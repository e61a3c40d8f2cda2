"""Node ids are unique across the store, and a clash stores nothing.

The projections look nodes up by id across sessions (a branch refers to its
source's nodes, a merge brings a peer's items), so a second session reusing
an id used to be stored and then break every projection.  These run the
real event store, and the racing case uses two application instances, as
two API processes would be.
"""

from __future__ import annotations

from typing import Any

import pytest

from domain import errors
from domain.application import CtxStore
from service.runtime import Runtime


def test_an_id_used_by_another_session_is_refused_and_nothing_is_stored(
    app: CtxStore, store_url: str
) -> None:
    a, _ = app.start_session()
    b, _ = app.start_session()
    app.append_node(a, role="user", node_id="shared")
    before = app.session_events(b)
    with pytest.raises(errors.DuplicateNode) as refused:
        app.append_node(b, role="user", node_id="shared")
    assert refused.value.code == "duplicate_node"
    assert app.session_events(b) == before
    assert app.append_node(b, role="user", node_id="other")[0] == "other"
    rt = Runtime(store_url, auto_compact=False)
    try:
        rt.catch_up()  # the projection takes every stored event
        assert rt.head_commit(str(b))["head_node_id"] == "other"
    finally:
        rt.close()


def test_a_branch_cannot_reuse_an_id_of_its_source(app: CtxStore) -> None:
    source, _ = app.start_session()
    app.append_node(source, role="user", node_id="u1")
    app.append_node(source, role="assistant", node_id="a1")
    branch, _ = app.branch(source, "a1")
    for node_id in ("u1", "a1"):
        with pytest.raises(errors.DuplicateNode):
            app.append_node(branch, role="user", node_id=node_id)
    with pytest.raises(errors.DuplicateNode):  # a retry's new version is a node too
        app.add_sibling(source, of="a1", kind="retry", node_id="u1", output="again")


def test_a_claim_lost_to_a_racing_writer_stores_nothing(
    app: CtxStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both writers validate; the event store's key decides at save, and says why."""
    other = CtxStore(url=store_url)
    try:
        a, _ = app.start_session()
        b, _ = other.start_session()
        save = app._save
        raced: list[str] = []

        def late(agg: Any, added: Any = ()) -> None:
            if added and not raced:  # the other process claims the id just before our save
                raced.append(added[0])
                other.append_node(b, role="user", node_id=added[0])
            save(agg, added)

        monkeypatch.setattr(app, "_save", late)
        before = app.session_events(a)
        with pytest.raises(errors.DuplicateNode):
            app.append_node(a, role="user", node_id="contested")
        assert raced == ["contested"]
        assert app.session_events(a) == before
        assert [e.node_id for e in other.session_events(b)[1:]] == ["contested"]
    finally:
        other.close()
