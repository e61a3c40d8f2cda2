"""Erasures by other processes, as one process learns of them.

An erasure rewrites the projection tables below its own position too
(``service/erasure.py``), and deletes the erased events' states; a process
that did not run it learns of it from the log, at its next batch.  Two
things it holds may then show erased content: a partition's projector
(``part_sync.synced`` starts that one over), and the states it remembers of
the events it appended (``pg_events.RecentStates``), which are the whole
process's, not a partition's: a partition whose projector is new, and so
never looked, still has its process forget them.

A third is the renders the process cached: ``found`` counts the erasures
it learnt of, and is part of their key.  A partition whose projector was
dropped (a failed batch) starts a new one that holds nothing stale, but the
process's cached renders may quote what was erased, so a new projector
looks too.

The log is read only where this process has not looked: past a
projector's position (other processes projected there), or, for a new
projector, past what was looked at before.  A process's own batches, and
its own erasures (``record``), read nothing more.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Connection

from domain.call_input import forget as forget_parsed_calls
from domain.erasure import ERASURE_TOPIC
from projections.notification_reads import topic_positions
from projections.pg_events import forget_recent_states


def forget_erased_content(recorder: Any) -> None:
    """Let go of what this process holds in memory that an erasure may have rewritten:
    event states read lately, tool calls' parsed arguments.  The process that erased and
    those that learn of it later call this one function, so neither forgets less."""
    forget_recent_states(recorder)
    forget_parsed_calls()


class ErasureWatch:
    def __init__(self, recorder: Any, since: int) -> None:
        """``since``: the log's position when the process started (what it holds
        came after; an erasure before it erased nothing it holds)."""
        self.recorder = recorder
        self.checked = since  # every erasure up to here is in ``positions``
        self.positions: set[int] = set()  # and any found past it
        self.found = 0  # erasures by other processes learnt of (a cached render's key)
        self._guard = threading.Lock()

    def between(self, conn: Connection, after: int | None, upto: int) -> bool:
        """Whether an erasure is in (``after``, ``upto``]: ``after`` is a projector's
        position, None for a new projector (which holds nothing yet).  Any erasure
        found makes the process forget what it holds of erased content
        (``forget_erased_content``)."""
        with self._guard:
            if after is not None and after >= upto:
                return False  # nothing projected elsewhere: nothing to look at
            lower = self.checked if after is None else max(after, self.checked)
            if upto > lower:
                found = set(topic_positions(self.recorder, conn, lower + 1, upto,
                                            ERASURE_TOPIC)) - self.positions  # fmt: skip
                if found:  # new to this process (a range read past a gap may repeat)
                    self.positions |= found
                    self.found += len(found)
                    forget_erased_content(self.recorder)
                if lower == self.checked:
                    self.checked = upto
            return after is not None and any(after < p <= upto for p in self.positions)

    def record(self, positions: range) -> None:
        """This process's own erasure, at ``positions`` (it forgot and reset what it
        held itself): not to be learnt of again from the log."""
        with self._guard:
            self.positions |= set(positions)
