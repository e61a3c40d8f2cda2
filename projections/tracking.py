"""Tracking rows: one per partition, each the position its projection reached.

A single tracking row made every batch of every process take turns, even
for sessions that share nothing.  Sessions are split into ``P`` partitions
(``projections.partitions``), and each partition has its own row: a batch
locks only its partition's row (``FOR UPDATE`` on PostgreSQL; SQLite's
``BEGIN IMMEDIATE`` locks the whole file anyway, so P=1 is its default).

``P`` is stored with the rows (the ``partitions`` column of every one): a
process started with another ``CTXSTORE_PARTITIONS`` uses the stored count,
because the rows already written say which partition each session is in.
The count changes only when the projections are rebuilt from empty.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from projections import tables as t

APPLICATION = "ctxstore"


def _rows(conn: Connection, lock: bool) -> dict[int, int]:
    c = t.tracking.c
    query = select(c.partition, c.notification_id).where(c.application_name == APPLICATION)
    if lock and conn.dialect.name != "sqlite":
        # in partition order, so two processes locking several never deadlock
        query = query.order_by(c.partition).with_for_update()
    return {int(p): int(n) for p, n in conn.execute(query)}


def ensure(conn: Connection, insert: Any, partitions: int) -> int:
    """Create the tracking rows if there are none; the partition count they store."""
    c = t.tracking.c
    stored = stored_partitions(conn)
    if stored is not None:
        return stored
    # FOR UPDATE locks no row that does not exist yet, so two processes starting
    # together may both get here: the first insert wins, the other does nothing.
    rows = [{"application_name": APPLICATION, "partition": p, "notification_id": 0,
             "partitions": partitions} for p in range(partitions)]  # fmt: skip
    conn.execute(insert.values(rows).on_conflict_do_nothing())
    # Two processes configured apart, starting on an empty store together, would
    # leave rows of both counts (the inserts clash only where partitions overlap).
    counts = sorted(int(n) for n in conn.execute(
        select(c.partitions).where(c.application_name == APPLICATION).distinct()
    ).scalars())  # fmt: skip
    if counts != [partitions]:
        raise PartitionCountChanged(next(n for n in counts if n != partitions), partitions)
    return partitions


class PartitionCountChanged(RuntimeError):
    """The store's sessions are split into another number of partitions than this
    process's: an offline ``ctxstore rebuild`` with a new ``CTXSTORE_PARTITIONS``
    ran while it was up.  Its partition locks and session hashes no longer match
    the rows, so it projects nothing more until it restarts."""

    code = "restart_required"

    def __init__(self, stored: int, mine: int) -> None:
        super().__init__(
            f"the store is now split into {stored} partitions and this process into {mine} "
            "(CTXSTORE_PARTITIONS changed and the store was rebuilt): restart this process"
        )
        self.stored = stored
        self.mine = mine

    def __reduce__(self) -> tuple[type[PartitionCountChanged], tuple[int, int]]:
        """Picklable, so a rebuild's helper process can raise it to its parent."""
        return PartitionCountChanged, (self.stored, self.mine)


# Built once: every projected batch takes its partition's lock (issue 29).
_LOCK_SQLITE = select(t.tracking.c.notification_id, t.tracking.c.partitions).where(
    t.tracking.c.application_name == APPLICATION, t.tracking.c.partition == bindparam("at")
)
_LOCK_FOR_UPDATE = _LOCK_SQLITE.with_for_update()


def lock(conn: Connection, partition: int, partitions: int) -> int | None:
    """Lock ``partition``'s row for this transaction; its position.

    None if the store had no tracking rows yet (or they were made since).
    ``partitions`` is the count the caller split its sessions by: if the rows
    say otherwise it must not go on (``PartitionCountChanged``).  The stored
    count comes with the lock, so a batch costs no extra query for the check."""
    query = _LOCK_SQLITE if conn.dialect.name == "sqlite" else _LOCK_FOR_UPDATE
    row = conn.execute(query, {"at": partition}).first()
    if row is None:
        stored = stored_partitions(conn)
        if stored is None or stored == partitions:  # none yet, or made since by another
            return None
        raise PartitionCountChanged(stored, partitions)
    if int(row.partitions) != partitions:
        raise PartitionCountChanged(int(row.partitions), partitions)
    return int(row.notification_id)


def stored_partitions(conn: Connection) -> int | None:
    """The partition count the tracking rows store (None: there are none)."""
    c = t.tracking.c
    found = conn.execute(
        select(c.partitions).where(c.application_name == APPLICATION).limit(1)
    ).scalar()
    return None if found is None else int(found)


def lock_all(conn: Connection) -> dict[int, int]:
    """Lock every partition's row (rules changes, erasure): their positions."""
    return _rows(conn, True)


def positions(conn: Connection) -> dict[int, int]:
    """Every partition's committed position, without locking."""
    return _rows(conn, False)


# Built once: every projected batch runs it (issue 29).
_ADVANCE = update(t.tracking).where(
    t.tracking.c.application_name == APPLICATION, t.tracking.c.partition == bindparam("at")
)


def advance(conn: Connection, partition: int, position: int) -> None:
    conn.execute(_ADVANCE, {"at": partition, "notification_id": position})


def advance_all(conn: Connection, position: int) -> None:
    """Every partition's row to ``position`` (an erasure, holding them all)."""
    c = t.tracking.c
    conn.execute(
        update(t.tracking).where(c.application_name == APPLICATION).values(notification_id=position)
    )
