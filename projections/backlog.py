"""How far each partition's stored projection is behind the event log, in events.

A partition's tracking position moves only when it is caught up (a command
of one of its sessions, a worker's round), so ``head - position`` would
count other partitions' events too: an idle partition would look behind
while nothing of its own waits.  Its backlog is the events after its
position that it projects (``Processor._mine``), read from the log's
headers only (no state), and counted up to ``cap``: a figure for
readiness and for ``ctxstore_projection_lag_events``, not a scan of a
long log.  A read, never a write: it projects nothing.
"""

from __future__ import annotations

from typing import Any

from projections.notification_reads import notification_headers

PAGE = 1000


def backlog(processor: Any, cap: int = 10_000) -> dict[int, int]:
    """Each partition's unprojected events of its own (at most ``cap`` each)."""
    positions = processor.store.positions()
    head = processor.app.recorder.max_notification_id() or 0
    at = {p: positions.get(p, 0) for p in range(processor.partitions)}
    if processor.partitions == 1:
        return {0: min(cap, max(0, head - at[0]))}
    counts = {p: 0 for p in at}
    start, budget = min(at.values()) + 1, cap * processor.partitions  # headers read at most
    with processor.store.engine.connect() as conn:
        while start <= head and any(count < cap for count in counts.values()):
            notes = notification_headers(processor.app.recorder, conn, start, PAGE)
            for note in notes:
                for p, position in at.items():
                    if note.id > position and counts[p] < cap and processor._mine(note, p):
                        counts[p] += 1
            budget -= len(notes)
            if len(notes) < PAGE or budget <= 0:
                break
            start = notes[-1].id + 1
    return counts
