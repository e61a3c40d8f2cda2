"""Which tests make the quick tier (``pytest -m quick``), decided here rather than in each file.

Why: the full suite (both stores, the browser, the large sessions) takes about 20 minutes on two
cores; an edit-and-test loop needs minutes. The quick tier is every test module's SQLite (or
store-less) tests, less the browser tests, those marked ``slow``, and the few listed below
whose time alone would break the tier's three minutes (measured with ``--durations``). The full
suite still runs all of them on both stores.
"""

from __future__ import annotations

import pytest

# Node-id prefixes (relative to the repository root) left out of the quick tier: each takes
# seconds on SQLite alone, and the module keeps quicker tests in the tier.
SLOW: tuple[str, ...] = ()

BROWSER = "tests/ui/"


def uses_postgres(item: pytest.Item) -> bool:
    """A test parametrized on the PostgreSQL store, or marked as needing PostgreSQL."""
    if item.get_closest_marker("postgres") is not None:
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(v == "postgres" for v in callspec.params.values())


def is_quick(item: pytest.Item) -> bool:
    nodeid = item.nodeid
    return not (
        nodeid.startswith(BROWSER)
        or item.get_closest_marker("slow") is not None
        or uses_postgres(item)
        or nodeid.startswith(SLOW)
    )
