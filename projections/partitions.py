"""Which partition a session's events are projected in.

A session goes where the root of its branch lineage goes: the hash of the
root's id, modulo ``P``.  A branch reads its source's nodes and commits all
the time (its chain starts in the source, a tool call may hang off a node
the source holds), so keeping a lineage in one partition makes those reads
local and as of the event being applied.  Attach and merge read another
session at one moment only; when that session is in another partition the
processor waits for that partition to pass the event (``processor``).

The root is found from the session's first event (``SessionStarted`` names
the session it branched from), so every process computes the same
partition from the event log alone; the sessions table stores it too.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

PARTITIONS = 1  # SQLite's default: one writer at a time anyway
# PostgreSQL's: one partition's sessions are projected in one order, so with
# one a session's append waited for every other session's projection before
# it (an 8 MB node's: 54-60 ms against 8 ms alone, scripts/bench_limits.py),
# and the processes of a deployment could not project side by side.  An
# append costs the same at 8 as at 1 (its baseline 7.9 against 9.0 ms) and a
# rebuild too (19.9 against 20.0 s, README Benchmarks).
POSTGRES_PARTITIONS = 8


def configured(env: Mapping[str, str] | None = None, *, postgres: bool = False) -> int:
    """``CTXSTORE_PARTITIONS``: partitions for a store whose tracking rows are new;
    unset, ``POSTGRES_PARTITIONS`` for a ``postgres`` store, else ``PARTITIONS``."""
    env = os.environ if env is None else env
    text = env.get("CTXSTORE_PARTITIONS", "").strip()
    if not text:
        return POSTGRES_PARTITIONS if postgres else PARTITIONS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1024:
        raise ValueError(f"CTXSTORE_PARTITIONS must be a whole number from 1 to 1024, not {text!r}")
    return value


def requested(env: Mapping[str, str] | None = None) -> int | None:
    """``configured`` if ``CTXSTORE_PARTITIONS`` is set, else None (keep what is stored)."""
    env = os.environ if env is None else env
    return configured(env) if env.get("CTXSTORE_PARTITIONS", "").strip() else None


def hashed(session_id: str, partitions: int) -> int:
    """A stable hash (not Python's, which differs from one process to the next)."""
    return zlib.crc32(session_id.encode()) % partitions


FirstEvent = Callable[[UUID], Any]  # the session's first domain event, or None


class Partitioner:
    """Session id -> partition, remembered once found."""

    def __init__(self, partitions: int, first_event: FirstEvent) -> None:
        self.partitions = partitions
        self.first_event = first_event
        self._known: dict[str, int] = {}
        self._guard = threading.Lock()

    def of(self, session: object) -> int:
        """A session's partition (ids come as text or as UUIDs)."""
        if self.partitions == 1:
            return 0
        session_id = str(session)
        found = self._known.get(session_id)
        if found is not None:
            return found
        root = session_id
        for _ in range(64):  # a branch chain deeper than this is not a real one
            source = self._source(root)
            if source is None:
                break
            root = source
            if root in self._known:
                break
        partition = self._known.get(root, hashed(root, self.partitions))
        with self._guard:
            self._known[session_id] = self._known[root] = partition
        return partition

    def started(self, session_id: str, branched_from: Mapping[str, Any] | None) -> int:
        """The partition of a session whose ``SessionStarted`` is at hand."""
        if self.partitions == 1:
            return 0
        if branched_from:
            partition = self.of(str(branched_from["session_id"]))
        else:
            partition = hashed(session_id, self.partitions)
        with self._guard:
            self._known[session_id] = partition
        return partition

    def _source(self, session_id: str) -> str | None:
        try:
            uid = UUID(session_id)
        except ValueError:
            return None
        event = self.first_event(uid)
        branched = getattr(event, "branched_from", None)
        return str(branched["session_id"]) if branched else None
