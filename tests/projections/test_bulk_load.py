"""Pausing the collector while a session loads leaves it as it found it."""

from __future__ import annotations

import gc

import pytest

from projections.bulk_load import collector_paused


@pytest.mark.parametrize("on", [True, False])
def test_the_collector_is_resumed_as_it_was(on: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if on else gc.disable)()
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is on
        with pytest.raises(LookupError), collector_paused():
            raise LookupError("a load that fails")
        assert gc.isenabled() is on, "resumed after a failure too"
    finally:
        (gc.enable if was else gc.disable)()
