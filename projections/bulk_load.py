"""No cyclic collection while a session's rows become objects.

CPython's collector runs a young-generation pass every 700 net allocations,
on the bet that young objects die young.  A cold read disproves the bet:
loading a 300-turn session makes tens of thousands of objects (nodes, commit
metadata, items) that all live on, and each pass walks them again to learn
it (gen-0 and gen-1 passes were 3-4 ms of a 40 ms first read, issue 29).
So the collector is paused while rows already read are turned into objects
(never across a query, which may wait on a lock), and resumed as it was:
nothing is freed later than it would be by reference counting, and a cycle
made meanwhile waits only for the next pass.  ``gc.disable`` is process-wide:
a thread that allocates meanwhile is not collected either, for those few
milliseconds.  Where the collector was off already, it stays off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
