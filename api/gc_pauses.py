"""Keep the collector's full passes off the request path.

A server's heap is mostly long-lived: modules, the tokenizer, every warm
session's items.  CPython's full (generation 2) collection walks all of it,
and one lands inside a request now and then: 46-142 ms on a 300-turn
session, growing with the heap, and most of the read p99 (issue 29).  After
each HTTP request this moves every surviving object into the permanent
generation (``gc.freeze``), which the collector never walks: a collection
then visits only what later requests allocated.  Reference counting still
frees frozen objects; only a cycle that dies after being frozen waits, so
every ``full_every`` requests the heap is unfrozen and collected once (one
pause in that many, instead of one every few hundred).

``CTXSTORE_GC_FREEZE=0`` turns it off; ``CTXSTORE_GC_FULL_EVERY`` (10,000)
sets the period.
"""

from __future__ import annotations

import gc
import os

from starlette.types import ASGIApp, Receive, Scope, Send

FULL_EVERY = 10_000


class FrozenHeap:
    """ASGI middleware: ``gc.freeze()`` after each HTTP request."""

    def __init__(self, app: ASGIApp, full_every: int | None = None) -> None:
        self.app = app
        self.full_every = full_every or int(os.environ.get("CTXSTORE_GC_FULL_EVERY", FULL_EVERY))
        self.enabled = os.environ.get("CTXSTORE_GC_FREEZE", "1") != "0"
        self.served = 0
        if self.enabled:
            gc.freeze()  # what start-up loaded (the stack is built at the lifespan's start)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if self.enabled and scope["type"] == "http":
                self.served += 1
                if self.served % self.full_every == 0:
                    gc.unfreeze()
                    gc.collect()
                gc.freeze()
