"""Workers split the partitions between them with leases that expire.

A ``ctxstore worker`` holds a lease row per partition it projects and
renews it every round; a worker that dies stops renewing, and once its
leases expire the others take its partitions over.  Each worker takes its
fair share: the partitions divided by the workers whose leases are live,
rounded up, so a new worker gets some and the last one standing gets all.

Leases only split the work; they are not what keeps it correct.  Every
batch still locks its partition's tracking row and reads the position in
that transaction (``projections.tracking``), so two workers that both
believe they own a partition (a lease expiring mid-batch, clocks apart)
take turns, and no event is lost or applied twice.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from sqlalchemy import delete, select

from projections import tables as t
from projections.store import ProjectionStore

LEASE_SECONDS = 10.0
PRESENT = -1  # the row a live worker keeps whatever it holds


class Leases:
    def __init__(self, store: ProjectionStore, owner: str, partitions: int,
                 seconds: float = LEASE_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.store = store
        self.owner = owner
        self.partitions = partitions
        self.seconds = seconds
        self.clock = clock

    def renew(self) -> list[int]:
        """Renew what this worker holds, take a fair share of the rest; what it holds now."""
        c = t.leases.c
        now = self.clock()
        with self.store.writing() as conn:
            query = select(c.partition, c.owner, c.expires_at)
            if not self.store.is_sqlite:
                # one renewal at a time: two workers must not both take a free partition
                conn.exec_driver_sql("LOCK TABLE ctx_leases IN SHARE ROW EXCLUSIVE MODE")
            rows = list(conn.execute(query))
            live = {o for _, o, until in rows if until > now} | {self.owner}
            share = math.ceil(self.partitions / len(live))
            owners = {int(p): (o, until) for p, o, until in rows if p != PRESENT}
            mine = sorted(p for p, (o, _) in owners.items() if o == self.owner)
            free = [p for p in range(self.partitions)
                    if p not in owners or owners[p][1] <= now]  # fmt: skip
            # its own first, then free ones; a worker over its share lets the rest go
            held = (mine + [p for p in free if p not in mine])[:share]
            conn.execute(delete(t.leases).where(
                c.partition.in_(set(mine) | set(free)) | (c.owner == self.owner)
                | (c.expires_at <= now)
            ))  # fmt: skip
            # "present" even while holding nothing, so the others make room
            conn.execute(t.leases.insert(), [
                {"partition": p, "owner": self.owner, "expires_at": now + self.seconds}
                for p in [PRESENT, *held]
            ])  # fmt: skip
        return sorted(held)

    def release(self) -> None:
        """Let every partition go at once (a worker stopping cleanly)."""
        with self.store.writing() as conn:
            conn.execute(delete(t.leases).where(t.leases.c.owner == self.owner))

    def holders(self) -> dict[int, tuple[str, float]]:
        """Who holds each partition, until when."""
        c = t.leases.c
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(c.partition, c.owner, c.expires_at)
                                .where(c.partition != PRESENT))  # fmt: skip
            return {int(p): (str(o), float(e)) for p, o, e in rows}
