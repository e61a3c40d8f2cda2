"""Drop every projection, rebuild it from the event log, compare digests.

The digest covers every row of every projection table in primary-key
order, so equal digests mean the rebuilt tables are byte-identical to the
live ones (invariant 10).  A rebuild is also how a store is split into a
new number of partitions (``CTXSTORE_PARTITIONS``): then the tracking rows
and each session's partition differ by design, so both digests leave that
layout out and the result says how the split changed.
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
from projections import partitions as parts
from projections import recall_index, tracking
from projections import tables as t
from projections.packed_text import unpack
from projections.parallel_catch_up import catch_up_in_parallel
from projections.processor import Processor
from projections.records import dumps
from projections.store import PACKED, ProjectionStore


def digest(store: ProjectionStore, layout: bool = True) -> dict[str, str]:
    with store.engine.connect() as conn:
        return digest_on(conn, layout)


def digest_on(conn: Connection, layout: bool = True) -> dict[str, str]:
    """``digest`` of the tables ``conn`` sees (inside a transaction: one snapshot);
    without ``layout``, of all but how sessions are split into partitions."""
    out: dict[str, str] = {}
    for table in t.PROJECTION_TABLES:
        if not layout and table is t.tracking:
            continue
        h = hashlib.sha256()
        keys = list(table.primary_key.columns)
        columns = [c for c in table.columns if layout or c.name != "partition"]
        packed = [c.name in PACKED.get(table.name, ()) for c in columns]
        for row in conn.execute(select(*columns).order_by(*keys)):
            h.update(dumps([_plain(v, p) for v, p in zip(row, packed, strict=True)]).encode())
            h.update(b"\n")
        out[table.name] = h.hexdigest()
    if conn.dialect.name == "sqlite":  # what the index holds: ``ctx_recall`` keeps no text
        schema = conn.get_execution_options().get("schema_translate_map", {}).get(None)
        out[recall_index.FTS] = recall_index.fts_digest(conn, schema)
    return out


def _plain(value: Any, packed: bool = False) -> Any:
    """A value as it reads: a packed column's text (``projections.packed_text``) is its
    JSON, so a row an older version wrote equals the packed row a rebuild writes of it.
    Only those columns: a title or a recall text may well begin with ``zlib:``."""
    if packed and isinstance(value, str | bytes):
        return unpack(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return repr(value)
    return str(value)


Progress = Callable[[int, int], None]  # (events projected, events in the log)


def rebuild(app: CtxStore, store: ProjectionStore, policy: Policy | None = None,
            progress: Progress | None = None, processes: int = 1,
            partitions: int | None = None) -> int:  # fmt: skip
    """Truncate and replay; the recorded rules history decides which policy applies.

    ``partitions``: the split of the rebuilt rows (``resplit_count``'s by
    default).  ``processes`` > 1 shares the partitions out to that many
    processes (``projections.parallel_catch_up``; PostgreSQL with P > 1 only)."""
    if partitions is None:
        with store.engine.connect() as conn:
            partitions = resplit_count(tracking.stored_partitions(conn), not store.is_sqlite)
    store.truncate(partitions)
    history = store.policy_history()
    processor = Processor(app, store, policy or (history[-1][1] if history else Policy()),
                          partitions=partitions)  # fmt: skip
    if progress is None:
        return catch_up_in_parallel(processor, processes)
    total = app.recorder.max_notification_id() or 0
    if processes > 1:  # the helpers report nothing on the way: the bar ends full
        events = catch_up_in_parallel(processor, processes)
        progress(total, total)
        return events
    return processor.catch_up(on_page=lambda done: progress(done, total))


def resplit_count(stored: int | None, postgres: bool = False) -> int:
    """The partition count a rebuild splits into: ``CTXSTORE_PARTITIONS`` if it is
    set, else the ``stored`` count (else the store's default).  A rebuild run from
    a shell that happens not to set it must not quietly put every session of a
    split store into one."""
    return parts.requested() or stored or parts.configured({}, postgres=postgres)


def rebuild_and_compare(url: str, progress: Progress | None = None,
                        processes: int = 1) -> dict[str, Any]:  # fmt: skip
    # Before anything is emptied: without the tokenizer the rebuild would stop
    # halfway and leave the projection tables empty.
    check_tokenizer()
    app = CtxStore(url=url)
    store = ProjectionStore(url)
    try:
        history = store.policy_history()
        live_policy = history[-1][1] if history else Policy()
        Processor(app, store, live_policy).catch_up()  # live tables are up to date first
        with store.engine.connect() as conn:
            split = tracking.stored_partitions(conn)
        resplit = resplit_count(split, not store.is_sqlite)
        layout = split == resplit
        before = digest(store, layout)
        started = time.perf_counter()
        events = rebuild(app, store, live_policy, progress, processes, resplit)
        seconds = time.perf_counter() - started
        after = digest(store, layout)
    finally:
        store.close()
        app.close()
    result: dict[str, Any] = {
        "identical": before == after,
        "events": events,
        "seconds": round(seconds, 3),
        "before": before,
        "after": after,
    }
    if not layout:  # processes still running split the old way: they must restart
        result["partitions"] = {"before": split, "after": resplit}
    return result
