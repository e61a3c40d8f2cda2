"""The working set's size and evictions, and a rebuild's progress, in a real scrape."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from starlette.testclient import TestClient

import service.runtime as runtime_module
from api.app import create_app
from scripts import cli
from tests.api.conftest import LOCAL
from tests.api.test_metrics import scrape, value
from tests.conftest import immediate_policy


def test_the_working_set_size_and_its_evictions_are_scraped(store_url: str) -> None:
    rt = runtime_module.Runtime(
        store_url, policy=immediate_policy(), working_set=3, partitions=1
    )  # one partition: one budget of 3
    try:
        with TestClient(create_app(rt), base_url=LOCAL) as client:
            before = scrape(client)
            sids = [client.post("/sessions", json={"title": "t"}).json()["session_id"]
                    for _ in range(3)]  # fmt: skip
            for sid in sids:  # two nodes a session: a budget of 3 holds one or two sessions
                for text in ("a", "b"):
                    r = client.post(f"/sessions/{sid}/nodes", json={"role": "user", "input": text})
                    assert r.status_code == 201
            assert client.get(f"/sessions/{sids[0]}/render").status_code == 200  # read back
            after = scrape(client)
    finally:
        rt.close()
    evicted = value(after, "ctxstore_working_set_evictions_total") - value(
        before, "ctxstore_working_set_evictions_total"
    )
    assert evicted >= 2  # the earlier sessions went as later ones came in
    # as of the last trim: within the budget (the render read a session back in since)
    assert value(after, "ctxstore_working_set_sessions", partition="0") >= 1
    assert 0 < value(after, "ctxstore_working_set_nodes", partition="0") <= 3


def test_a_rebuild_reports_its_progress_in_gauges(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = runtime_module.Runtime(store_url, policy=immediate_policy())
    try:
        rt.execute("start_session", title="t")
    finally:
        rt.close()
    assert cli.main(["rebuild", "--db", store_url]) == 0
    capsys.readouterr()
    total = REGISTRY.get_sample_value("ctxstore_rebuild_total_events")
    done = REGISTRY.get_sample_value("ctxstore_rebuild_replayed_events")
    assert total is not None and total > 0 and done == total
