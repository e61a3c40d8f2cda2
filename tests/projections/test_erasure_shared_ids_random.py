"""The erasure-equals-rebuild property when root sessions share node ids.

``random_sessions.Driver`` lets the store number nodes, so no two sessions
ever share an id there.  Here every root session numbers its own nodes
``n0, n1, ...`` (branches take ids of their own, which a branch must), so
attaches and merges between roots copy nodes whose ids the copier also has.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.projections import test_erasure_scope as scope
from tests.projections.random_sessions import STEPS, Driver, Sess, Step, fresh_store

_fresh = itertools.count()


def _colliding_append(self: Driver, sess: Sess, role: str, **kw: Any) -> str:
    branched = self.rt.app.session(sess.sid).branched_from is not None
    own = sum(1 for n in sess.nodes if n.startswith("n") or "_" in n)
    kw.setdefault("node_id", f"{sess.sid[:8]}_{next(_fresh)}" if branched else f"n{own}")
    return _original(self, sess, role, **kw)


_original = Driver.append


@pytest.fixture(autouse=True)
def _collide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Driver, "append", _colliding_append)


@settings(max_examples=25, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])  # fmt: skip
@given(steps=STEPS, victim=st.integers(0, 5))
def test_erasure_equals_rebuild_when_roots_share_ids(
    store_url: str, tmp_path: Path, steps: list[Step], victim: int
) -> None:
    with fresh_store(store_url, tmp_path, next(scope.COUNTER)) as url:
        scope._erase_one(url, steps, victim)


@pytest.mark.parametrize("victim", [0, 1, 2])
def test_fixed_busy_store_with_shared_ids(store_url: str, victim: int) -> None:
    scope.test_a_fixed_busy_store_erases_each_kind_of_session(store_url, victim)
