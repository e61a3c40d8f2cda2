"""``scripts/bench_storage.py``: its breakdown adds up to the store it measured.

Figures themselves are not asserted beyond what the store must hold: the
workload's turns as events, nodes and commits.
"""

from __future__ import annotations

from scripts import bench_storage as bench
from scripts.coding_workload import ctx_nodes, workload


def test_the_breakdown_counts_the_workloads_rows_and_the_whole_file() -> None:
    turns = 6
    found = bench.measure("sqlite", 1, turns)
    nodes = sum(len(ctx_nodes(turn)) for turn in workload(0, turns))
    assert found["ctx_nodes"][0] == nodes
    assert found["stored_events"][0] == nodes + 1  # each node's event and the session's start
    assert found["ctx_commits"][0] >= nodes
    tables = sum(size for name, (_, size) in found.items() if not name.startswith("("))
    assert 0 < tables <= found["(file)"][1]
    shown = bench.table({"base": found, "this": found}, turns)
    assert "| ctx_nodes | " in shown and shown.count("bytes per turn") == 1
