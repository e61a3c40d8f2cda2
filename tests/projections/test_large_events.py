"""Large events beside small ones: nothing hangs, nothing is lost (issue 13).

On PostgreSQL, eventsourcing's recorder inserted through a psycopg pipeline
that could stop sending an 8 MB INSERT halfway and wait for an answer the
server could not give (``projections.pg_events``): a few 8 MB appends
while another session appended hung both writers for good.  The threads
here are joined with a timeout, so a hang fails the test instead of the run.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from domain.application import CtxStore
from domain.store_config import PG_RECORDER_TOPIC
from projections.pg_events import UnpipelinedRecorder
from service.runtime import Runtime
from tests.conftest import incompressible

HANG = 120  # seconds: far beyond what these appends take on a loaded machine
# incompressible: an event of two stays megabytes once stored (domain.state_compressor)
NODE = incompressible(4_000_000)


def _id(result: Any) -> str:
    return str(result[0] if isinstance(result, tuple) else result)


def test_big_batches_beside_small_appends_all_land(store_url: str) -> None:
    runtime = Runtime(store_url)
    hung = False
    try:
        big = _id(runtime.execute("start_session", title="big"))
        small = _id(runtime.execute("start_session", title="small"))
        failures: list[BaseException] = []

        def run(work: Any) -> threading.Thread:
            def guarded() -> None:
                try:
                    work()
                except BaseException as exc:  # reported below, in the test's thread
                    failures.append(exc)

            thread = threading.Thread(target=guarded, daemon=True)
            thread.start()
            return thread

        nodes = [{"role": "user", "output": NODE}, {"role": "assistant", "output": NODE}]
        writers = [
            run(lambda: [runtime.execute("append_nodes", big, nodes) for _ in range(3)]),
            run(
                lambda: [
                    runtime.execute("append_node", small, role="user", output=f"q {i}")
                    for i in range(40)
                ]
            ),  # fmt: skip
        ]
        for thread in writers:
            thread.join(HANG)
        hung = any(thread.is_alive() for thread in writers)
        assert not hung, f"a writer got no answer in {HANG} s (the store hung)"
        assert not failures, failures
        assert len(runtime.branch_nodes(big)["nodes"]) == 6
        assert len(runtime.branch_nodes(small)["nodes"]) == 40
        assert {n["output"] for n in runtime.branch_nodes(big)["nodes"]} == {NODE}
    finally:
        if not hung:  # a hung connection would hang closing the pool too
            runtime.close()


@pytest.mark.parametrize("via_env", [False, True])
def test_postgres_events_are_inserted_without_a_pipeline(
    store_url: str, via_env: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a URL or through eventsourcing's own variables alike."""
    if not store_url.startswith("postgresql"):
        pytest.skip("the pipeline is PostgreSQL's")
    if via_env:
        from domain.store_config import eventsourcing_env

        for name, value in eventsourcing_env(store_url).items():
            if name != "APPLICATION_RECORDER_TOPIC":
                monkeypatch.setenv(name, value)
        app = CtxStore()
    else:
        app = CtxStore(url=store_url)
    try:
        assert type(app.recorder) is UnpipelinedRecorder
        assert PG_RECORDER_TOPIC.endswith(":" + UnpipelinedRecorder.__name__)
    finally:
        app.close()
