"""One lock per session, so work on one session never waits for another's.

A single process-wide lock made a 20 MB body being tokenized, or a hung
summarizer, stall every other session's append.  Commands on one session
still take turns (the cached aggregate is mutated in place, and a turn
lost to a concurrent writer would only be retried), but sessions proceed
in parallel.  Locks are never nested across sessions, so two commands that
each read the other's session (attach, merge) cannot deadlock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SessionLocks:
    """A reentrant lock per key, created on first use and dropped when unused."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.RLock, int]] = {}

    @contextmanager
    def hold(self, key: object) -> Iterator[None]:
        with self.attempt(key, blocking=True):
            yield

    @contextmanager
    def attempt(self, key: object, blocking: bool = False) -> Iterator[bool]:
        """The lock if it is free (or this thread's already): whether it was had."""
        name = str(key)
        with self._guard:
            lock, users = self._locks.get(name, (threading.RLock(), 0))
            self._locks[name] = (lock, users + 1)
        had = False
        try:
            had = lock.acquire(blocking=blocking)
            yield had
        finally:
            if had:
                lock.release()
            with self._guard:
                lock, users = self._locks[name]
                if users == 1:
                    del self._locks[name]
                else:
                    self._locks[name] = (lock, users - 1)
