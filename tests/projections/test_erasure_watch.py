"""Another process's erasures, looked for only where a process has not looked
(``projections.erasure_watch``)."""

from __future__ import annotations

from typing import Any

import pytest

from domain.call_input import memo_sizes, tool_input
from projections import erasure_watch
from projections.erasure_watch import ErasureWatch
from service.erasure import Eraser
from service.runtime import Runtime


def test_the_log_is_read_only_past_what_was_looked_at(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = Runtime(store_url, auto_compact=False)
    try:
        gone = str(rt.app.start_session("erased", "local:tiny")[0])
        rt.execute("append_node", gone, role="user", input="secret")
        before = rt.app.recorder.max_notification_id()
        Eraser(rt).erase(gone, "test")
        erased_at = rt.app.recorder.max_notification_id()
        reads: list[tuple[int, int]] = []
        real = erasure_watch.topic_positions

        def counted(recorder: Any, conn: Any, start: int, stop: int, topic: str) -> list[int]:
            reads.append((start, stop))
            return real(recorder, conn, start, stop, topic)

        monkeypatch.setattr(erasure_watch, "topic_positions", counted)
        watch = ErasureWatch(rt.app.recorder, before)
        with rt.store.engine.connect() as conn:
            assert not watch.between(conn, erased_at, erased_at)  # its own batch: no read
            assert reads == []
            # a new projector holds nothing erased, but the cached renders may: one look
            assert not watch.between(conn, None, erased_at)
            assert reads == [(before + 1, erased_at)] and watch.found == 1
            assert watch.between(conn, before, erased_at)  # lagging: the erasure is there
            assert reads == [(before + 1, erased_at)]  # known already: no second read
            assert not watch.between(conn, None, erased_at)
            assert reads == [(before + 1, erased_at)] and watch.found == 1
        # the process that erased records its own erasure: nothing to learn of it later
        own = rt.processor.erasures
        assert own.found == 0 and any(before < p <= erased_at for p in own.positions)
        with rt.store.engine.connect() as conn:
            own.between(conn, None, erased_at)
        assert own.found == 0
    finally:
        rt.close()


def test_learning_of_an_erasure_drops_the_parsed_tool_arguments(store_url: str) -> None:
    """This process erased, or another did: what it parsed of tool calls goes
    (``call_input``), by the one function both call (``forget_erased_content``)."""
    rt = Runtime(store_url, auto_compact=False)
    try:
        gone = str(rt.app.start_session("erased", "local:tiny")[0])
        before = rt.app.recorder.max_notification_id()
        tool_input('{"password": "hunter2"}')
        Eraser(rt).erase(gone, "test")
        assert memo_sizes() == (0, 0)
        erased_at = rt.app.recorder.max_notification_id()
        tool_input('{"password": "hunter2"}')
        assert memo_sizes()[0] >= 1
        watch = ErasureWatch(rt.app.recorder, before)
        with rt.store.engine.connect() as conn:
            watch.between(conn, None, erased_at)
        assert watch.found == 1 and memo_sizes() == (0, 0)
    finally:
        rt.close()
