"""Idempotency keys past their time, deleted from the event store.

A key's claim is honoured for ``CTXSTORE_IDEMPOTENCY_TTL`` only
(``domain.idempotency``); after that it answers nothing, but its bytes (the
answer sent, a hash of the request) stay until deleted.  Every erasure
deletes the expired claims on its way (``service/erasure.py``); this
deletes them without one (``ctxstore erase --expired-keys``), under the
same table lock, and compacts the files as an erasure does.

On SQLite an event's notification id is its rowid, which the table gives
again once the newest row is deleted: a process whose position is that id
would never see the event stored next.  So a claim that holds the newest
row is left for the next sweep (it is never honoured meanwhile).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from projections.store import WRITE_OPTION
from service.erasure_store import EventTables
from service.runtime import Runtime


def forget_expired_keys(runtime: Runtime) -> dict[str, Any]:
    """Delete every claim older than the TTL; how many went, and whether the files
    were compacted."""
    tables = EventTables(runtime)
    expired = runtime.clock() - runtime.idempotency_ttl
    with runtime._lock:  # noqa: SLF001  (as an erasure: no command interleaves)
        with runtime.store.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                top = tables.lock(conn)
                claims = tables.key_claims(conn, set(), expired)
                if tables.is_sqlite and claims:
                    newest = conn.execute(
                        text(f"SELECT originator_id FROM {tables.events} WHERE rowid = :top"),
                        {"top": top},
                    ).scalar()
                    claims = [c for c in claims if tables.key(c) != newest]
                tables.delete(conn, claims)
    compacted = tables.compact() if claims else True
    return {"forgotten": len(claims), "compacted": compacted}
