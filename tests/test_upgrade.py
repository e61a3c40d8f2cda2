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

from domain.node_claim import claim_id, legacy_claim_id
from projections.rebuild import rebuild_and_compare
from service.erasure import Eraser
from service.runtime import Runtime

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE = FIXTURES / "legacy_store.db.gz"
# written by main at 279e8df, when node ids were claimed store-wide (revision 0009)
BEFORE_SESSION_IDS = FIXTURES / "store_before_session_ids.db.gz"
LATER = datetime(2026, 12, 1, tzinfo=UTC)


def unpacked(fixture: Path, path: Path) -> str:
    with gzip.open(fixture, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return f"sqlite:///{path}"


@pytest.fixture
def legacy(tmp_path: Path) -> str:
    return unpacked(FIXTURE, tmp_path / "legacy.db")


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


def test_a_store_from_before_session_scoped_ids_upgrades_then_reuses_ids(tmp_path: Path) -> None:
    """Revision 0010 rebuilds the projections from the unchanged events; then two
    sessions (old or new) may both use ``call_0``, and an id stays unique in its session."""
    url = unpacked(BEFORE_SESSION_IDS, tmp_path / "before.db")
    rt = Runtime(url)
    try:
        found = sessions(rt)
        assert set(found) == {"legacy main", "legacy branch", "legacy notes"}
        main = found["legacy main"]["session_id"]
        notes = found["legacy notes"]["session_id"]
        branch = found["legacy branch"]["session_id"]
        head = rt.head_commit(main)
        assert head["head_node_id"] == "final" and len(head["parent_ids"]) == 1
        assert rt.explain(main, "t5")["transitions"], "its audit trail was rebuilt"
        shown = rt.head_commit(branch)["items"]
        assert [i["item_id"] for i in shown[-2:]] == ["bu1", "ba1"]
        # ids other sessions hold are free in this one; its own are not
        rt.execute("append_node", notes, role="user", node_id="task", input="mine", at=LATER)
        with pytest.raises(Exception, match="already exists"):
            rt.execute("append_node", notes, role="user", node_id="n1", at=LATER)
        with pytest.raises(Exception, match="history this branch shows"):
            rt.execute("append_node", branch, role="user", node_id="a99", at=LATER)
        for title in ("run 1", "run 2"):
            sid = str(rt.execute("start_session", title, at=LATER)[0])
            rt.execute("append_node", sid, role="user", node_id="u", input="go", at=LATER)
            rt.execute("append_node", sid, role="assistant", node_id="call_0", at=LATER)
            assert rt.head_commit(sid)["head_node_id"] == "call_0"
    finally:
        rt.close()
    assert rebuild_and_compare(url)["identical"]


def test_erasing_a_new_session_keeps_an_old_sessions_claim_of_the_same_id(
    tmp_path: Path,
) -> None:
    """An old store claimed ``final`` store-wide for ``legacy main``; a newer session
    that also used ``final``, once erased, takes only what was its own."""
    url = unpacked(BEFORE_SESSION_IDS, tmp_path / "before.db")
    rt = Runtime(url)
    try:
        main = sessions(rt)["legacy main"]["session_id"]
        old_claim = rt.app.recorder.select_events(legacy_claim_id("final"))
        assert old_claim, "the fixture holds the old store-wide claim"
        sid = str(rt.execute("start_session", "new", at=LATER)[0])
        rt.execute("append_node", sid, role="user", node_id="final", input="mine", at=LATER)
        Eraser(rt).erase(sid, "test")
        assert rt.app.recorder.select_events(legacy_claim_id("final")) == old_claim
        assert not rt.app.recorder.select_events(claim_id(sid, "final"))
        assert rt.head_commit(main)["head_node_id"] == "final"
    finally:
        rt.close()
    assert rebuild_and_compare(url)["identical"]
