"""Erasure and the projection: tombstones, nested copies, and rebuild == live.

C attaches B, which had attached A; C summarizes what it holds (so its
summary quotes A through B's copy).  Erasing A must tombstone B's attach,
C's copy of it and C's summary, and a rebuild from the remaining events
must give the live tables byte for byte.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from domain.errors import SessionNotFound, StaleVersion
from projections.rebuild import rebuild_and_compare
from service.erasure import Eraser
from service.runtime import Runtime
from tests.conftest import immediate_policy


@pytest.fixture
def rt(store_url: str) -> Iterator[Runtime]:
    # summary_target 0.25, the default these scenarios were written under: after an
    # erasure the recorded summary folds again over what is left, and at a larger
    # target these small sessions would have nothing left to fold (no summary to show)
    runtime = Runtime(store_url, policy=immediate_policy(tail_turns=1, summary_target=0.25))
    try:
        yield runtime
    finally:
        runtime.close()


def _turns(rt: Runtime, sid: Any, text: str, count: int, numbered: bool = False) -> None:
    """``numbered``: the node ids ``u0, a0, u1, ...`` every session may use alike."""
    for i in range(count):
        user, assistant = ({"node_id": f"u{i}"}, {"node_id": f"a{i}"}) if numbered else ({}, {})
        rt.execute("append_node", sid, role="user", input=f"{text} asks {i}", **user)
        rt.execute("append_node", sid, role="assistant", output=f"{text} answers {i}",
                   **assistant)  # fmt: skip


def test_nested_copies_and_their_summaries_become_tombstones(rt: Runtime, store_url: str) -> None:
    marker = "NESTED" + secrets.token_hex(10)
    a, _ = rt.execute("start_session", "A")
    _turns(rt, a, marker, 3)
    b, _ = rt.execute("start_session", "B")
    rt.execute("append_node", b, role="user", input="b starts")
    rt.execute("attach", b, a)
    _turns(rt, b, "b", 1)
    c, _ = rt.execute("start_session", "C")
    rt.execute("append_node", c, role="user", input="c starts")
    rt.execute("attach", c, b)
    _turns(rt, c, "c", 5)
    summary = rt.compact(str(c))
    d, _ = rt.execute("start_session", "D (untouched)")
    _turns(rt, d, "d", 2)
    untouched = json.dumps(rt.rendered(str(d)))
    assert marker in json.dumps(rt.head_commit(str(c)))

    erased = Eraser(rt).erase(str(a), "test")
    assert erased["referrers"] == sorted([str(b), str(c)])
    assert erased["tombstoned"] == [{"session_id": str(c), "summary_id": summary["summary_id"]}]
    for sid in (b, c):
        shown = json.dumps(rt.head_commit(str(sid)))
        assert marker not in shown and f"from session {a} was erased" in shown
    assert "[Summary erased:" in json.dumps(rt.head_commit(str(c)))
    assert json.dumps(rt.rendered(str(d))) == untouched
    _turns(rt, c, "c again", 1)
    assert rebuild_and_compare(store_url)["identical"] is True


def test_erasing_the_newest_events_keeps_later_writes_projected(
    rt: Runtime, store_url: str
) -> None:
    """The erased events were the log's last: new events must still reach the projection."""
    keep, _ = rt.execute("start_session", "keep")
    _turns(rt, keep, "keep", 1)
    gone, _ = rt.execute("start_session", "gone")
    _turns(rt, gone, "gone", 2)
    Eraser(rt).erase(str(gone), "test")
    rt.execute("append_node", keep, role="user", input="after")
    assert rt.branch_nodes(str(keep))["nodes"][-1]["input"] == "after"
    other = Runtime(store_url, policy=immediate_policy(tail_turns=1))
    try:  # a second process reads the same
        assert other.branch_nodes(str(keep))["nodes"][-1]["input"] == "after"
    finally:
        other.close()
    assert rebuild_and_compare(store_url)["identical"] is True


def _attached(rt: Runtime, marker: str) -> tuple[str, str]:
    """Session A, two turns quoting ``marker``, and session B that attached A."""
    a, _ = rt.execute("start_session", "A")
    _turns(rt, a, marker, 2)
    b, _ = rt.execute("start_session", "B")
    rt.execute("append_node", b, role="user", input="b starts")
    rt.execute("attach", b, a)
    return str(a), str(b)


def test_another_process_forgets_the_erased_session(rt: Runtime, store_url: str) -> None:
    """A second process that had the session in memory serves and stores none of it afterwards."""
    marker = "OTHER" + secrets.token_hex(10)
    a, b = _attached(rt, marker)
    other = Runtime(store_url, policy=immediate_policy(tail_turns=1))
    try:
        assert marker in json.dumps(other.rendered(str(b)))  # cached there
        other.app.session(str(a))  # and the aggregate too
        Eraser(rt).erase(str(a), "test")
        with pytest.raises(SessionNotFound):
            other.execute("append_node", a, role="user", input=f"{marker} again")
        with pytest.raises(SessionNotFound):
            other.rendered(str(a))
        assert marker not in json.dumps(other.rendered(str(b)))
        assert marker not in json.dumps(other.head_commit(str(b)))
    finally:
        other.close()
    assert rebuild_and_compare(store_url)["identical"] is True


@pytest.mark.parametrize("expected_version", [None, 2])
def test_a_write_that_loses_to_an_erasure_stores_nothing_and_says_why(
    rt: Runtime, store_url: str, expected_version: int | None
) -> None:
    """The erasure's record is the session's next event: a writer in another process
    whose save collides with it is told the session is gone (404) or, if it named the
    version it expected, that it is stale (409, and a reload is a 404), never a 500."""
    a, _ = rt.app.start_session("t")
    rt.app.append_node(a, role="user", input="hello")
    other = Runtime(store_url)
    try:
        other.app.session(str(a))  # cached there
        # as if the erasure committed between that process's fast-forward and its save
        other.app.repository.fastforward = False
        Eraser(rt).erase(str(a), "test")
        told = SessionNotFound if expected_version is None else StaleVersion
        with pytest.raises(told):
            other.app.append_node(a, role="user", input="again",
                                  expected_version=expected_version)  # fmt: skip
    finally:
        other.close()
    assert rebuild_and_compare(store_url)["identical"] is True


def test_a_render_cached_before_an_erasure_elsewhere_goes_with_a_dropped_projector(
    rt: Runtime, store_url: str
) -> None:
    """A process whose projector was dropped (a failed batch) starts a new one after
    another process's erasure: the render it cached before must not be served."""
    marker = "DROPPED" + secrets.token_hex(10)
    a, b = _attached(rt, marker)
    other = Runtime(store_url, policy=immediate_policy(tail_turns=1))
    try:
        assert marker in json.dumps(other.rendered(str(b)))  # cached there
        other.processor.projector = None  # as after a batch that failed
        Eraser(rt).erase(str(a), "test")
        assert marker not in json.dumps(other.rendered(str(b)))
    finally:
        other.close()


# Node ids are unique per session only: a bare id of the erased session names
# nothing of another session, so another session's own nodes of that id (and
# its summaries over them) are not copies of erased content.
def test_own_summary_of_a_referrer_is_kept_when_ids_collide(rt: Runtime, store_url: str) -> None:
    a, _ = rt.execute("start_session", "A (erased)")
    _turns(rt, a, "secret", 4, numbered=True)
    b, _ = rt.execute("start_session", "B (same ids, own content)")
    _turns(rt, b, "public", 4, numbered=True)
    summary = rt.compact(str(b))  # covers B's own u0/a0..., nothing of A
    rt.execute("attach", b, a)  # later, B attaches A: B is re-projected
    erased = Eraser(rt).erase(str(a), "test")
    assert erased["tombstoned"] == [], summary["summary_id"]
    assert "[Summary erased:" not in json.dumps(rt.head_commit(str(b)))
    assert rebuild_and_compare(store_url)["identical"] is True
