"""Projection fixtures: a real Runtime on each store, auto-compaction off.

Tests that want compaction call ``rt.compact`` themselves, so every summary
in them is one the test asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from service.runtime import Runtime
from tests.conftest import immediate_policy


@pytest.fixture
def rt(store_url: str) -> Iterator[Runtime]:
    runtime = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def rt_thinking(store_url: str) -> Iterator[Runtime]:
    """``rt`` keeping every turn's thinking (``keep_thinking_turns`` null), for tests of
    what thinking blocks are; ``test_shape_requests`` tests clearing them."""
    runtime = Runtime(store_url, auto_compact=False,
                      policy=immediate_policy(keep_thinking_turns=None))  # fmt: skip
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def rt_recall(store_url: str) -> Iterator[Runtime]:
    """``rt`` on a deployment whose policy lists the ``recall`` tool in every request."""
    runtime = Runtime(store_url, auto_compact=False, policy=immediate_policy(recall_tool=True))
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def pg_recorder(store_url: str) -> Iterator[Any]:
    """The PostgreSQL store's event recorder (``UnpipelinedRecorder``); skips on SQLite."""
    from domain.application import CtxStore
    from projections.pg_events import UnpipelinedRecorder

    if not store_url.startswith("postgresql"):
        pytest.skip("PostgreSQL's recorder")
    app = CtxStore(url=store_url)
    try:
        assert isinstance(app.recorder, UnpipelinedRecorder)
        yield app.recorder
    finally:
        app.close()
