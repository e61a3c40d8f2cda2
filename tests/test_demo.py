"""The demo shows the product at the default rules: the inspector's first open on the sample
session finds aging, clearing, a summary, a pin, a branch and an attach (scripts/demo.py).

It asserts that each is there, not how many: the rules' constants may move."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scripts import demo
from service.runtime import Runtime


@pytest.fixture
def shown(store_url: str) -> Iterator[tuple[Runtime, str]]:
    sid, fresh = demo.demo_session(store_url)
    assert fresh
    runtime = Runtime(store_url)
    try:
        yield runtime, sid
    finally:
        runtime.close()


def _states(commit: dict[str, Any]) -> set[str]:
    return {item["state"] for item in commit["items"]}


def test_the_demo_session_shows_every_state_at_the_default_rules(
    shown: tuple[Runtime, str],
) -> None:
    runtime, sid = shown
    head = runtime.head_commit(sid)
    assert {"full", "aged", "summarized", "summary"} <= _states(head)
    aged = next(item for item in head["items"] if item["state"] == "aged")
    explained = runtime.explain(sid, aged["item_id"])
    assert [t["rule"] for t in explained["transitions"]][-1:] == ["tool_aging"]
    assert runtime.session_info(sid)["pinned"] == ["u1"]
    assert any(item["locked"] for item in head["items"] if item["item_id"] == "u1")


def test_the_demo_session_has_a_branch_whose_answer_it_attaches(
    shown: tuple[Runtime, str],
) -> None:
    runtime, sid = shown
    branches = [s for s in runtime.sessions() if (s["branched_from"] or {}).get("session_id")
                == sid]  # fmt: skip
    assert [b["branched_from"]["node_id"] for b in branches] == [demo.BRANCH_AT]
    attached = {item["attached_from"] for item in runtime.head_commit(sid)["items"]}
    assert f"{branches[0]['session_id']}:ba1" in attached


def test_a_second_start_adds_nothing(store_url: str) -> None:
    sid, _ = demo.demo_session(store_url)
    runtime = Runtime(store_url)
    try:
        before = [s["session_id"] for s in runtime.sessions()]
    finally:
        runtime.close()
    assert demo.demo_session(store_url) == (sid, False)
    runtime = Runtime(store_url)
    try:
        assert [s["session_id"] for s in runtime.sessions()] == before
    finally:
        runtime.close()
