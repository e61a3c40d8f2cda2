"""A caller that named no version is never told it is stale (issue 13, finding 7)."""

from __future__ import annotations

import pytest

from domain import errors
from domain.application import CtxStore
from domain.session import Session
from domain.session_store import RACE_ATTEMPTS
from tests.conftest import opened_app


def test_losing_every_race_without_a_version_is_contention_not_staleness(
    app: CtxStore, store_url: str
) -> None:
    sid, _ = app.start_session()
    lost: list[int] = []
    with opened_app(store_url) as other:

        def always_late(agg: Session) -> str:
            other.append_node(sid, role="user")  # another process wins every round
            lost.append(1)
            return agg.append_node("user", output="mine")

        with pytest.raises(errors.WriteContention):
            app._command(sid, None, always_late)
        assert len(lost) == RACE_ATTEMPTS
        assert not any(n.get("output") == "mine" for n in app.session(sid).nodes.values())
        with pytest.raises(errors.StaleVersion):  # a caller that named a version still is
            app._command(sid, app.session(sid).version - 1, always_late)
