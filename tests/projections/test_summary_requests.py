"""A commit's summary request stays one chunk however long compaction does not run.

Compaction may be off, or its summarizer down (every attempt a 502): under
the rules before generation 2 the session kept growing past the threshold
(generation 2's window guard folds it back instead), and each commit still
names the run it wants folded.  Uncapped, that run (and the stored request, and the
scan that finds it) grew with the whole history on every commit.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from alembic import command
from sqlalchemy import select

from domain.policy import Policy
from domain.rules.summarize import with_item_ids
from projections import queries as q
from projections import tables as t
from projections.migrate import alembic_config, upgrade
from projections.rebuild import rebuild_and_compare
from projections.records import dumps
from service.runtime import Runtime

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
CAP = 300


def grow_without_compaction(url: str, cap: int | None) -> list[dict[str, object]]:
    rt = Runtime(url, auto_compact=False, policy=Policy(summary_max_tokens=cap, generation=1))
    try:
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=4_000,
                            at=T0)  # fmt: skip
        rt.execute("append_node", sid, role="user", input="the task", at=T0)
        for n in range(150):
            rt.execute("append_node", sid, role="assistant", output=f"step {n} " * 20,
                       at=T0 + timedelta(seconds=n))  # fmt: skip
        with rt.store.engine.connect() as conn:
            rows = conn.execute(select(t.commits.c.summary_request)
                                .order_by(t.commits.c.notification_id)).all()  # fmt: skip
        return [json.loads(r[0]) for r in rows if r[0]]
    finally:
        rt.close()


def test_requests_stay_one_chunk_without_compaction(store_url: str) -> None:
    requests = grow_without_compaction(store_url, CAP)
    assert len(requests) > 80, "the session went far past the threshold"
    item = max(r["tokens"] // r["item_count"] for r in requests) + 1  # type: ignore[operator, arg-type]
    assert all(CAP <= r["tokens"] < CAP + item for r in requests)  # type: ignore[operator]
    sizes = [r["item_count"] for r in requests]  # type: ignore[arg-type]
    assert sizes[-1] <= sizes[0] + 1, "the last request is no longer than the first"


def test_uncapped_requests_grow_with_the_history(store_url: str) -> None:
    """What the cap prevents (and the rules of policies recorded before it)."""
    requests = grow_without_compaction(store_url, None)
    sizes = [r["item_count"] for r in requests]  # type: ignore[arg-type]
    assert sizes[-1] > 3 * sizes[0]


def test_requests_stored_as_id_lists_migrate_to_the_range_a_rebuild_writes(
    store_url: str,
) -> None:
    """Revision 0003 rewrites the old form in place: no replay, and rebuilds still match."""
    requests = grow_without_compaction(store_url, CAP)
    rt = Runtime(store_url, auto_compact=False, auto_catch_up=False, migrate=False)
    try:
        rt.catch_up()  # loads the projector's indexes from the tables
        projector = rt.processor.projector
        assert projector is not None
        ranged = commit_requests(rt)
        legacy = {
            cid: dumps(with_item_ids(json.loads(body), projector.items_of(cid)))
            for cid, body in ranged.items()
        }  # fmt: skip
        assert all('"item_ids"' in body for body in legacy.values())
        with rt.store.engine.begin() as conn:
            for cid, body in legacy.items():
                conn.execute(t.commits.update().where(t.commits.c.commit_id == cid)
                             .values(summary_request=body))  # fmt: skip
    finally:
        rt.close()
    config = alembic_config(store_url)
    command.stamp(config, "0002")
    command.upgrade(config, "0003")  # just the revision under test, then back to head
    command.stamp(config, "head")
    upgrade(store_url)
    again = Runtime(store_url, auto_compact=False, auto_catch_up=False, migrate=False)
    try:
        assert commit_requests(again) == ranged, "converted to exactly the range form"
        assert [json.loads(b) for b in ranged.values()] == requests
    finally:
        again.close()
    assert rebuild_and_compare(store_url)["identical"]


def commit_requests(rt: Runtime) -> dict[str, str]:
    with rt.store.engine.connect() as conn:
        rows = conn.execute(select(t.commits.c.commit_id, t.commits.c.summary_request)
                            .where(t.commits.c.summary_request.is_not(None))
                            .order_by(t.commits.c.notification_id)).all()  # fmt: skip
    return {cid: body for cid, body in rows}


def test_live_commands_reuse_the_scan_while_its_run_is_untouched(store_url: str) -> None:
    """One catch-up per command: the memo must survive from one to the next."""
    rt = Runtime(store_url, auto_compact=False, policy=Policy(summary_max_tokens=CAP, generation=1))
    try:
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=4_000,
                            at=T0)  # fmt: skip
        rt.execute("append_node", sid, role="user", input="the task", at=T0)
        memos = []
        for n in range(120):
            rt.execute("append_node", sid, role="assistant", output=f"step {n} " * 20,
                       at=T0 + timedelta(seconds=n))  # fmt: skip
            projector = rt.processor.projector_of(sid)
            assert projector is not None
            head = q.head_commit_id(projector, q.session_row(projector, str(sid)))
            memos.append(projector.contexts[str(head)].request_memo)
        assert memos[-1] is not None and memos[-1] is memos[-2], "reused, not rescanned"
    finally:
        rt.close()
