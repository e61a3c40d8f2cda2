"""One watcher per process wakes the SSE streams whose session changed.

Each open stream used to poll the database every quarter second: 500 idle
streams cost about a core.  Now a stream waits on an ``asyncio.Event`` and
costs nothing while its session is quiet.  While at least one stream waits,
the watcher reads the projections' tracking positions once per interval (one
tiny query whatever the number of streams); when a partition's moves, one
more query names the sessions changed since, and only their streams wake
and read.

No change can slip between a stream's first frame and its first wake-up: a
stream subscribes before it reads its state, and when the watcher starts (or
the position goes backwards, after a rebuild) it wakes every stream once.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.concurrency import run_in_threadpool

from service.runtime import Runtime

log = logging.getLogger("ctxstore.api")


class StreamWatcher:
    """Only the event loop touches it; the queries run in the threadpool."""

    def __init__(self, runtime: Runtime, interval: float) -> None:
        self.runtime, self.interval = runtime, interval
        self.waiting: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, session_id: str) -> asyncio.Event:
        wake = asyncio.Event()
        self.waiting.setdefault(session_id, set()).add(wake)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch())
        return wake

    def unsubscribe(self, session_id: str, wake: asyncio.Event) -> None:
        events = self.waiting.get(session_id)
        if events is not None:
            events.discard(wake)
            if not events:
                del self.waiting[session_id]

    def _wake(self, session_ids: list[str] | None) -> None:
        """Wake the streams of these sessions (None: all of them)."""
        for sid in self.waiting if session_ids is None else session_ids:
            for wake in self.waiting.get(sid, ()):
                wake.set()

    async def _watch(self) -> None:
        """Runs while any stream waits, and ends by itself when none does."""
        seen: dict[int, int] | None = None  # each partition's position at the last round
        while self.waiting:
            try:
                now = await run_in_threadpool(self.runtime.positions)
                moved = [p for p, at in now.items() if seen is not None and at > seen.get(p, at)]
                if (
                    seen is None
                    or now.keys() != seen.keys()
                    or any(at < seen[p] for p, at in now.items())
                ):
                    self._wake(None)
                elif moved:
                    # partitions advance out of step: each one's sessions changed after
                    # its own last position (the furthest position alone would miss a
                    # change, the lowest would hold one back until every partition moves)
                    since = {p: seen[p] for p in moved}
                    self._wake(
                        await run_in_threadpool(self.runtime.store.sessions_changed_after, since)
                    )
                seen = now
            except Exception:  # a database hiccup: streams stay open, the next round retries
                log.warning("stream watcher could not read the position", exc_info=True)
            await asyncio.sleep(self.interval)
