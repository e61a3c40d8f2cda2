"""``scripts/bench_projection.py``: its bounds must measure what they claim.

The compute bound is only a bound if it does the rebuild's whole projection
step: the commit rows it builds in memory must be the rows a rebuild stores.
Figures themselves are never asserted (tests do not judge wall time).
"""

from __future__ import annotations

from sqlalchemy import select

from projections import packed_text
from projections import tables as t
from projections.rebuild import rebuild
from scripts import bench_projection as bench
from service.runtime import Runtime


def test_compute_bound_builds_the_commits_a_rebuild_stores(store_url: str) -> None:
    rt = Runtime(store_url)
    try:
        session = bench.Session(rt)
        session.grow_to(300)
        events, seconds, projector = bench.compute_only(rt.app, rt.policy)
        assert events == rt.app.recorder.max_notification_id() and seconds > 0
        rebuild(rt.app, rt.store, rt.policy)
        with rt.store.engine.connect() as conn:
            stored = {r.commit_id: dict(r._mapping) for r in conn.execute(select(t.commits))}
    finally:
        rt.close()
    in_memory = projector.pending
    assert in_memory.keys() == stored.keys() and len(stored) >= 300
    for commit_id, row in stored.items():
        built = {k: in_memory[commit_id][k] for k in row}
        if store_url.startswith("sqlite"):  # a packed text is stored as its bytes there
            built["items"] = packed_text.stored(built["items"])
        assert built == row
