"""An erasure re-projects only the sessions it affects, and the result is a rebuild's.

Random sessions with branches, attaches, merges, pins, model switches and
summaries (``random_sessions.Driver``); then one of them is erased.  The live
tables, of which only the erased and affected sessions' rows were dropped
and projected again, must be byte for byte what a full rebuild gives, and a
session that never touched the erased one keeps its rows untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from domain.policy import Policy
from projections import tables as t
from projections.rebuild import rebuild_and_compare
from service.erasure import Eraser
from service.runtime import Runtime
from tests.projections.random_sessions import STEPS, Driver, Step, fresh_store

COUNTER = iter(range(10**9))


def _rows(rt: Runtime, session_id: str) -> list[Any]:
    with rt.store.engine.connect() as conn:
        out: list[Any] = []
        for table in (t.sessions, t.nodes, t.commits, t.transitions, t.usage):
            keys = list(table.primary_key.columns)
            query = select(table).where(table.c.session_id == session_id).order_by(*keys)
            out += [tuple(row) for row in conn.execute(query)]
        return out


def _erase_one(url: str, steps: list[Step], victim: int) -> dict[str, Any]:
    rt = Runtime(url, policy=Policy(tail_turns=2, result_cap=2_000), working_set=3)
    try:
        driver = Driver(rt)
        driver.seed()
        for step in steps:
            driver.run(step)
        bystander = driver.start("bystander")  # never touches anything else
        driver.append(bystander, "user", input="hello")
        driver.append(bystander, "assistant", output="hi")
        before = _rows(rt, bystander.sid)
        sessions = [s.sid for s in driver.sessions if s is not bystander]
        erased = Eraser(rt).erase(sessions[victim % len(sessions)], "test")
        assert erased["reprojected"] < len(driver.sessions) - len(erased["erased_sessions"])
        assert _rows(rt, bystander.sid) == before
        driver.append(driver.sessions[0], "user", input="after") if sessions[0] not in erased[
            "erased_sessions"] else None  # fmt: skip
    finally:
        rt.close()
    result = rebuild_and_compare(url)
    assert result["identical"], {k: v for k, v in result["after"].items()
                                 if result["before"][k] != v}  # fmt: skip
    return erased


@settings(max_examples=10, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])  # fmt: skip
@given(steps=STEPS, victim=st.integers(0, 5))
def test_erasing_any_session_of_random_sessions_equals_a_rebuild(
    store_url: str, tmp_path: Path, steps: list[Step], victim: int
) -> None:
    with fresh_store(store_url, tmp_path, next(COUNTER)) as url:
        _erase_one(url, steps, victim)


@pytest.mark.parametrize("victim", [0, 1, 2])
def test_a_fixed_busy_store_erases_each_kind_of_session(store_url: str, victim: int) -> None:
    """Main (attached and merged by others), source (attached) or a branch."""
    ops = ["tool", "assistant", "tool", "pin", "user", "branch", "tool", "attach", "attach",
           "retry", "checkout", "assistant", "merge", "edit", "unpin", "model", "usage",
           "compact", "tool", "assistant", "tool", "assistant", "merge", "compact"]  # fmt: skip
    steps = [(op, (n * 7) % 4, n * 31, n * 17, (20, 61, 5)[n % 3])
             for n, op in enumerate(ops)]  # fmt: skip
    _erase_one(store_url, steps, victim)
