"""Two application instances on one store, as two API processes would be.

Each instance keeps its own cache of sessions; these check that a copy
another process has moved on never makes a command succeed on old state
nor fail wrongly, and that racing writers all land.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from domain import errors
from domain.application import CtxStore
from tests.conftest import opened_app


@pytest.fixture
def other(store_url: str) -> Iterator[CtxStore]:
    with opened_app(store_url) as second:
        yield second


def warm(app: CtxStore) -> str:
    sid, _ = app.start_session()
    app.append_node(sid, role="user", node_id="u1")
    return str(sid)


def test_a_node_another_process_added_is_known(app: CtxStore, other: CtxStore) -> None:
    sid = warm(app)  # cached here at version 2
    other.append_node(sid, role="assistant", node_id="a1")
    node, version = app.append_node(sid, role="tool", caller="a1", node_id="t1")
    assert (node, version) == ("t1", 4)
    assert app.session(sid).nodes["t1"]["parent"] == "a1"


def test_the_default_parent_is_the_stored_head(app: CtxStore, other: CtxStore) -> None:
    sid = warm(app)
    other.append_node(sid, role="assistant", node_id="a1")
    app.append_node(sid, role="user", node_id="u2")  # no predecessor named: HEAD
    assert app.session(sid).nodes["u2"]["parent"] == "a1"
    assert [e.originator_version for e in app.session_events(sid)] == [1, 2, 3, 4]


def test_a_version_the_caller_saw_elsewhere_is_current(app: CtxStore, other: CtxStore) -> None:
    sid = warm(app)
    _, seen = other.append_node(sid, role="assistant", node_id="a1")
    assert app.append_node(sid, expected_version=seen, role="user", node_id="u2")[1] == seen + 1
    with pytest.raises(errors.StaleVersion):  # and a really stale one is still refused
        app.append_node(sid, expected_version=seen, role="user", node_id="u3")


def test_reads_see_what_another_process_stored(app: CtxStore, other: CtxStore) -> None:
    sid = warm(app)
    other.append_node(sid, role="assistant", node_id="a1")
    assert app.session(sid).head == "a1" and app.session(sid).version == 3
    branch, _ = app.branch(sid, "a1")  # a source another process moved on
    assert str(app.session(branch).branched_from["node_id"]) == "a1"


def test_a_command_with_nothing_to_store_is_judged_on_the_stored_state(
    app: CtxStore, other: CtxStore
) -> None:
    """Pinning looks like a no-op on a copy that predates another process's unpin."""
    sid = warm(app)
    app.pin(sid, "u1")  # cached here: pinned, version 3
    other.unpin(sid, "u1")  # stored: unpinned, version 4
    assert app.pin(sid, "u1") == (None, 5)
    assert other.session(sid).pinned == ["u1"]
    with pytest.raises(errors.StaleVersion):
        app.pin(sid, "u1", expected_version=3)


def test_unversioned_appends_from_several_processes_all_land(store_url: str) -> None:
    """Parallel tool results posted through several workers: none is refused as stale."""
    import threading

    with ExitStack() as stack:
        apps = [stack.enter_context(opened_app(store_url)) for _ in range(4)]
        sid = warm(apps[0])
        for app in apps[1:]:
            app.session(sid)  # every process has the session cached
        start = threading.Barrier(len(apps))
        failures: list[BaseException] = []

        def post(app: CtxStore, worker: int) -> None:
            try:
                start.wait()
                for i in range(8):
                    app.append_node(sid, role="user", node_id=f"w{worker}-{i}")
            except BaseException as exc:  # reported below
                failures.append(exc)

        threads = [threading.Thread(target=post, args=(a, n)) for n, a in enumerate(apps)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert failures == []
        versions = [e.originator_version for e in apps[0].session_events(sid)]
        assert versions == list(range(1, 3 + len(apps) * 8))
