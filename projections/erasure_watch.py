"""Erasures by other processes, as one process learns of them.

An erasure rewrites the projection tables below its own position too
(``service/erasure.py``), and deletes the erased events' states; a process
that did not run it learns of it from the log, at its next batch.  Two
things it holds may then show erased content: a partition's projector
(``part_sync.synced`` starts that one over), and the states it remembers of
the events it appended (``pg_events.RecentStates``), which are the whole
process's, not a partition's: a partition whose projector is new, and so
never looked, still has its process forget them.

The log is read only where this process has not looked and something it
holds may be stale: past a projector's position (other processes projected
there), or, for a new projector while states are remembered, past what was
looked at before.  A process's own batches read nothing more.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Connection

from domain.erasure import ERASURE_TOPIC
from projections.notification_reads import topic_positions
from projections.pg_events import forget_recent_states, holds_recent_states


class ErasureWatch:
    def __init__(self, recorder: Any, since: int) -> None:
        """``since``: the log's position when the process started (what it holds
        came after; an erasure before it erased nothing it holds)."""
        self.recorder = recorder
        self.checked = since  # every erasure up to here is in ``positions``
        self.positions: set[int] = set()  # and any found past it
        self._guard = threading.Lock()

    def between(self, conn: Connection, after: int | None, upto: int) -> bool:
        """Whether an erasure is in (``after``, ``upto``]: ``after`` is a projector's
        position, None for a new projector (which holds nothing yet).  Any erasure
        found makes the process forget the states it remembers."""
        with self._guard:
            if after is not None and after >= upto:
                return False  # nothing projected elsewhere: nothing to look at
            if after is None and not holds_recent_states(self.recorder):
                return False
            lower = self.checked if after is None else max(after, self.checked)
            if upto > lower:
                found = set(topic_positions(self.recorder, conn, lower + 1, upto,
                                            ERASURE_TOPIC)) - self.positions  # fmt: skip
                if found:  # new to this process (a range read past a gap may repeat)
                    self.positions |= found
                    forget_recent_states(self.recorder)
                if lower == self.checked:
                    self.checked = upto
            return after is not None and any(after < p <= upto for p in self.positions)
