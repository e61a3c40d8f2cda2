"""The heap is frozen after each request, and collected in full every ``full_every``."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from api.gc_pauses import FrozenHeap


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def _client(full_every: int) -> TestClient:
    async def ok(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/", ok)],
                    middleware=[Middleware(FrozenHeap, full_every=full_every)])  # fmt: skip
    return TestClient(app)


def test_what_a_request_leaves_is_frozen() -> None:
    with _client(full_every=1000) as client:
        gc.unfreeze()
        assert client.get("/").text == "ok"
        assert gc.get_freeze_count() > 0


def test_a_cycle_frozen_with_the_heap_is_collected_at_the_full_pass() -> None:
    class Node:
        pass

    with _client(full_every=3) as client:
        client.get("/")  # 1
        cycle = Node()
        cycle.self = cycle  # type: ignore[attr-defined]
        alive = weakref.ref(cycle)
        client.get("/")  # 2: the cycle is frozen with the heap
        del cycle
        gc.collect()  # a frozen cycle waits
        assert alive() is not None
        client.get("/")  # 3: unfrozen, collected in full, frozen again
        assert alive() is None


def test_off_by_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSTORE_GC_FREEZE", "0")
    with _client(full_every=1000) as client:
        gc.unfreeze()
        client.get("/")
        assert gc.get_freeze_count() == 0
