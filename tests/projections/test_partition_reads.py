"""A query at P > 1 looks at the log's headers only, and only where it has not looked.

Before a query, the processor asks whether the log holds anything of the
query's partition past that partition's position.  It asked by reading
eventsourcing's notifications, states included, from that position on every
query: behind five 2 MB nodes of another partition, each GET of a quiet
session read 10.5 MB it threw away (the partition review, issue 13).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from projections.partitions import hashed
from projections.pg_events import LARGE_STATE
from service.runtime import Runtime
from tests.conftest import incompressible

PARTITIONS = 8


def _log_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Queries of the events table from now on (states or headers)."""
    seen: list[str] = []
    execute = psycopg.Cursor.execute

    def traced(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self.connection)
        if "ctxstore_events" in text and "notification_id" in text and "SELECT" in text:
            seen.append(text)
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", traced)
    return seen


def _states(queries: list[str]) -> list[str]:
    return [q for q in queries if "state" in q.split("FROM")[0] or "SELECT *" in q]


def test_a_query_of_a_quiet_partition_reads_no_state_and_looks_once(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("the read is traced at psycopg's cursor")
    monkeypatch.setenv("CTXSTORE_PARTITIONS", str(PARTITIONS))
    big = "a large tool result " + incompressible(2 * LARGE_STATE)
    writer = Runtime(store_url, auto_compact=False)
    reader = Runtime(store_url, auto_compact=False)  # another process: nothing remembered
    try:
        quiet = str(writer.app.start_session("quiet", "local:tiny")[0])
        writer.execute("append_node", quiet, role="user", input="hello")
        busy = quiet
        while hashed(busy, PARTITIONS) == hashed(quiet, PARTITIONS):
            busy = str(writer.app.start_session("busy", "local:tiny")[0])
        assert reader.branch_nodes(quiet)["nodes"][0]["input"] == "hello"
        for turn in range(3):
            writer.execute("append_node", busy, role="user", input=f"{turn} {big}")
        reads = _log_reads(monkeypatch)
        for _ in range(3):
            assert reader.branch_nodes(quiet)["nodes"][0]["input"] == "hello"
        first = list(reads)
        reads.clear()
        reader.branch_nodes(quiet)
        monkeypatch.undo()
        assert _states(first) == [], "a query read states of another partition's events"
        assert first, "the query did not look at the log at all"
        assert len(first) <= 3 and len(reads) <= 1, "a query read the log more than once"
        part = reader.processor.parts[reader.processor.partition_of(quiet)]
        end = reader.app.recorder.max_notification_id()
        assert max(part.projector.position, part.looked) == end, "the next query looks again"
        # what the busy partition appended is still found by a query of it
        assert reader.branch_nodes(busy)["nodes"][-1]["input"] == f"2 {big}"
    finally:
        writer.close()
        reader.close()
