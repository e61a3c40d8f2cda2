"""Drop every projection, rebuild it from the event log, compare digests.

The digest covers every row of every projection table in primary-key
order, so equal digests mean the rebuilt tables are byte-identical to the
live ones (invariant 10).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, select

from domain.application import CtxStore
from domain.policy import Policy
from domain.tokens import check_tokenizer
from projections import tables as t
from projections.processor import Processor
from projections.records import dumps
from projections.store import ProjectionStore


def digest(store: ProjectionStore) -> dict[str, str]:
    with store.engine.connect() as conn:
        return digest_on(conn)


def digest_on(conn: Connection) -> dict[str, str]:
    """``digest`` of the tables ``conn`` sees (inside a transaction: one snapshot)."""
    out: dict[str, str] = {}
    for table in t.PROJECTION_TABLES:
        h = hashlib.sha256()
        keys = list(table.primary_key.columns)
        for row in conn.execute(select(table).order_by(*keys)):
            h.update(dumps([_plain(v) for v in row]).encode())
            h.update(b"\n")
        out[table.name] = h.hexdigest()
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return repr(value)
    return str(value)


Progress = Callable[[int, int], None]  # (events projected, events in the log)


def rebuild(app: CtxStore, store: ProjectionStore, policy: Policy | None = None,
            progress: Progress | None = None) -> int:  # fmt: skip
    """Truncate and replay; the recorded rules history decides which policy applies."""
    store.truncate()
    history = store.policy_history()
    processor = Processor(app, store, policy or (history[-1][1] if history else Policy()))
    if progress is None:
        return processor.catch_up()
    total = app.recorder.max_notification_id() or 0
    return processor.catch_up(on_page=lambda done: progress(done, total))


def rebuild_and_compare(url: str, progress: Progress | None = None) -> dict[str, Any]:
    # Before anything is emptied: without the tokenizer the rebuild would stop
    # halfway and leave the projection tables empty.
    check_tokenizer()
    app = CtxStore(url=url)
    store = ProjectionStore(url)
    try:
        history = store.policy_history()
        live_policy = history[-1][1] if history else Policy()
        Processor(app, store, live_policy).catch_up()  # live tables are up to date first
        before = digest(store)
        started = time.perf_counter()
        events = rebuild(app, store, live_policy, progress)
        seconds = time.perf_counter() - started
        after = digest(store)
    finally:
        store.close()
        app.close()
    return {
        "identical": before == after,
        "events": events,
        "seconds": round(seconds, 3),
        "before": before,
        "after": after,
    }
