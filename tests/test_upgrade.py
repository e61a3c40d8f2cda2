"""A store written by the code before this version opens, upgrades and works, without loss.

``tests/fixtures/legacy_store.db.gz`` was written by commit 93571c0 (see
``make_legacy_store.py``): a session past the snapshot interval, model call
ids, retries, pins, a branch, an attach, a merge, a summary, usage.  Today's
code migrates it, serves it, keeps appending to it, and rebuilds it to the
same projections it serves.
"""

from __future__ import annotations

import gzip
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime

FIXTURE = Path(__file__).parent / "fixtures" / "legacy_store.db.gz"
LATER = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def legacy(tmp_path: Path) -> str:
    path = tmp_path / "legacy.db"
    with gzip.open(FIXTURE, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return f"sqlite:///{path}"


def sessions(rt: Runtime) -> dict[str, dict[str, Any]]:
    return {s["title"]: s for s in rt.sessions()}


def test_a_legacy_store_upgrades_and_keeps_working(legacy: str) -> None:
    rt = Runtime(legacy)
    try:
        found = sessions(rt)
        assert set(found) == {"legacy main", "legacy branch", "legacy notes"}
        main = found["legacy main"]["session_id"]
        before = rt.head_commit(main)
        assert rt.app.session(main).version > 500, "restored from a snapshot"
        assert rt.rendered(main, "anthropic")["request"]["messages"]
        assert rt.explain(main, "t5")["transitions"], "its audit trail is still there"
        # The old rules keep the old commits; new events run today's rules.
        node, _ = rt.execute("append_node", main, role="user", input="carry on", at=LATER)
        after = rt.head_commit(main)
        assert after["parent_ids"] == [before["id"]]
        assert after["rules_version"] != before["rules_version"]
        rt.compact(main)
    finally:
        rt.close()
    assert rebuild_and_compare(legacy)["identical"]


def test_legacy_sessions_belong_to_the_default_tenant(legacy: str) -> None:
    """v1 ``SessionStarted`` events and v2 ``Session`` snapshots upcast to the default tenant."""
    rt = Runtime(legacy)
    try:
        found = sessions(rt)
        main = found["legacy main"]["session_id"]
        assert rt.app.session(main).tenant == "default"  # restored from a v2 snapshot
        for title, row in found.items():
            assert rt.app.session(row["session_id"]).tenant == "default", title
        listed, _ = rt.sessions_page(tenant="default")
        assert {s["title"] for s in listed} == set(found)
        assert rt.sessions_page(tenant="acme")[0] == []
        with pytest.raises(Exception, match="unknown session"):
            rt.session_info(main, tenant="acme")
    finally:
        rt.close()
