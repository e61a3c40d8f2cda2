"""Holding every partition's lock at once, for what no catch-up may interleave with.

Commands and queries take one partition's lock (``Runtime._locked``).  An
erasure rewrites every projection table and drops what each partition holds
in memory, so it takes them all, always in partition order (two callers
doing so cannot deadlock); the locks are reentrant, so the erasure may
catch up while it holds them.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any
from uuid import UUID

from projections.processor import Processor


class AllPartitions:
    """A context manager over every partition lock of one process."""

    def __init__(self, processor: Processor) -> None:
        self.processor = processor

    def __enter__(self) -> None:
        for part in self.processor.parts:
            part.lock.acquire()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        for part in reversed(self.processor.parts):
            part.lock.release()


def is_id(value: Any) -> bool:
    """Whether ``value`` is a session id (a command's first argument may be anything)."""
    if not isinstance(value, str | UUID):
        return False
    try:
        UUID(str(value))
    except ValueError:
        return False
    return True
