"""Which tests make the quick tier (``pytest -m quick``), decided here rather than in each file.

Why: the full suite (both stores, the browser, the large sessions) takes about 20 minutes on two
cores; an edit-and-test loop needs minutes. The quick tier is every test module's SQLite (or
store-less) tests, less the browser tests, those marked ``slow``, the few listed below whose
time alone would break the tier's three minutes (measured with ``--durations``), and of a test
run over many parameters (each error code on each route, say) its first ``PARAMETERS``. The
full suite still runs all of them on both stores.
"""

from __future__ import annotations

import pytest

# Node-id prefixes (relative to the repository root) left out of the quick tier: each takes
# seconds on SQLite alone, and the module keeps quicker tests in the tier.
SLOW: tuple[str, ...] = (
    # property tests over random sessions (their own max_examples): the full suite runs them
    # (the window guarantee's property runs in the full suite; test_window_promise.py keeps
    # the window in the tier)
    "tests/projections/test_window_guarantee.py",
    "tests/projections/test_erasure_shared_ids_random.py::test_erasure_equals_rebuild_when_roots",
    "tests/projections/test_erasure_scope.py::test_erasing_any_session_of_random_sessions",
    "tests/projections/test_invariants.py::test_invariants_hold_over_random_sessions",
    "tests/api/test_openapi_conformance.py",  # schemathesis over every route
    "tests/api/test_tenant_isolation.py::test_two_tenants_never_see_each_others_data",
    "tests/domain/test_render.py::test_random_commits_render_well_formed",
    # large data, several processes, or waiting out timeouts on purpose
    "tests/projections/test_rebuild_large.py",
    "tests/projections/test_migrate.py::test_concurrent_first_starts_all_come_up",
    "tests/projections/test_leases.py::test_a_killed_workers_partitions",
    "tests/projections/test_drop_in_requests.py::test_both_shapes_validate_against_the_official",
    "tests/api/test_limits.py::test_a_body_that_trickles",
    "tests/api/test_limits.py::test_requests_per_client_are_capped",
    "tests/api/test_limits.py::test_streams_per_client_are_capped",
    "tests/api/test_limits.py::test_a_chunked_body_is_refused",
    "tests/api/test_limits.py::test_a_100_mb_body",
    "tests/api/test_json_skeleton.py::test_the_skeleton_has_the_bodys_keys_and_nesting",
    "tests/domain/test_splicing_transcoder.py::test_the_digest_is_the_one_it_always_was",
    "tests/test_cli.py::test_scripts_rebuild_runs_the_same_command",
    "tests/test_docs.py::test_the_examples_run",  # a demo server and every page's examples
    # long agent runs and a wheel built into a fresh virtualenv: the adapters and the
    # client keep their quicker tests in the tier (test_agents_session.py, the other
    # LangChain tests, test_client.py)
    "tests/api/test_agents_window.py",
    "tests/api/test_client_wheel.py",
    "tests/api/test_langchain_middleware.py::test_100_turns_at_16k",
)

BROWSER = "tests/ui/"
PARAMETERS = 3  # of a parametrized test, the quick tier runs its first three (on SQLite)


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


def quick_items(items: list[pytest.Item]) -> list[pytest.Item]:
    """The quick tier among ``items``: each test that ``is_quick``, and of a parametrized test
    function only its first ``PARAMETERS`` such variants."""
    seen: dict[str, int] = {}
    chosen = []
    for item in items:
        if not is_quick(item):
            continue
        function = item.nodeid.split("[", 1)[0]
        seen[function] = seen.get(function, 0) + 1
        if seen[function] <= PARAMETERS:
            chosen.append(item)
    return chosen
