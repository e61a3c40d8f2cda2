"""Auto-compaction follows the events a command recorded, not a list of command names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from domain.events import HeadMoved, NodeAppended, NodePinned
from service.compaction import grows_context
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.projections.test_context_commit import add, at, start
from tests.spies import calls_of


def test_only_events_that_can_grow_a_context_call_for_a_check() -> None:
    assert grows_context([NodeAppended])
    assert grows_context([HeadMoved, NodeAppended])
    assert not grows_context([HeadMoved])
    assert not grows_context([NodePinned])
    assert not grows_context([])


@pytest.fixture
def compacting(store_url: str) -> Iterator[Runtime]:
    runtime = Runtime(store_url, auto_compact=True, policy=immediate_policy())
    try:
        yield runtime
    finally:
        runtime.close()


def test_a_command_is_checked_for_compaction_by_what_it_recorded(
    compacting: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = compacting
    checked = calls_of(monkeypatch, rt, "_auto_compact")
    sid = start(rt, "policy")
    first = add(rt, sid, "user", "hello")
    add(rt, sid, "assistant", "hi", 1)
    assert checked == [(sid,), (sid,)], "each append recorded a NodeAppended"
    rt.execute("checkout", sid, first, at=at(2))
    rt.execute("pin", sid, node_id=first, at=at(3))
    assert checked == [(sid,), (sid,)], "a checkout and a pin grow nothing"
