"""``GET /metrics``: Prometheus text that moves as commands run, with bounded labels.

In-process the metrics are the process's (``prometheus_client``'s default
registry, shared by every test here), so each test compares before and after.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from api.app import create_app
from api.routes_ops import Operations
from service.api_keys import KeyStore
from tests.api.conftest import LOCAL
from tests.api.test_commands import World

MARKER = "zq-secret-marker-7741"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: TestClient, **headers: str) -> Samples:
    r = client.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(r.text)


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every series of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def test_metrics_parse_and_move_as_commands_run(client: TestClient) -> None:
    before = scrape(client)
    sid = client.post("/sessions", json={"title": MARKER}).json()["session_id"]
    key = {"Idempotency-Key": "k-1"}
    for _ in range(2):  # the second is a replay of the first
        r = client.post(f"/sessions/{sid}/nodes", json={"role": "user", "input": MARKER},
                        headers=key)  # fmt: skip
        assert r.status_code == 201
    said = {"role": "assistant", "output": MARKER}
    assert client.post(f"/sessions/{sid}/nodes", json=said).status_code == 201
    tool = {"role": "tool", "name": "run", "input": {"args": MARKER}, "output": MARKER}
    assert client.post(f"/sessions/{sid}/nodes", json=tool).status_code == 201
    assert client.get(f"/sessions/{sid}/render").status_code == 200
    missing = "00000000-0000-4000-8000-000000000000"
    r = client.post(f"/sessions/{missing}/nodes", json={"role": "user", "input": "x"})
    assert r.status_code == 404
    r = client.post(f"/sessions/{sid}/nodes", content=b"x", headers={"content-type": "text/plain"})
    assert r.status_code == 415
    after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("ctxstore_commands_total", command="start_session", outcome="stored") == 1
    assert moved("ctxstore_commands_total", command="append_node", outcome="stored") >= 3
    assert moved("ctxstore_commands_total", command="append_node", outcome="replayed") == 1
    assert moved("ctxstore_commands_total", command="append_node", outcome="refused",
                 code="session_not_found") == 1  # fmt: skip
    route = "/sessions/{sid}/nodes"
    assert moved("ctxstore_http_request_duration_seconds_count", route=route, method="POST",
                 status="201") == 4  # fmt: skip
    assert moved("ctxstore_http_request_duration_seconds_count", route="/sessions/{sid}/render",
                 status="200") == 1  # fmt: skip
    assert moved("ctxstore_command_wait_seconds_count", command="append_node",
                 stage="event_store") >= 2  # fmt: skip
    assert moved("ctxstore_command_wait_seconds_count", command="append_node",
                 stage="catch_up") >= 2  # fmt: skip
    assert moved("ctxstore_commits_total") >= 2
    assert moved("ctxstore_render_window_share_count") == 1
    assert moved("ctxstore_limit_refusals_total", status="415") == 1
    assert any(n == "ctxstore_projection_lag_events" for n, _ in after)
    assert value(after, "ctxstore_projection_lag_events") == 0  # every command caught up
    # bounded labels: never a session id, a tenant, or what was said
    for _, labels in after:
        for _, v in labels:
            assert sid not in v and MARKER not in v and "default" != v


def test_a_summary_counts_its_run_its_tokens_and_its_summarizer_call(client: TestClient) -> None:
    before = scrape(client)
    world = World(client)  # a session with a foldable run
    r = client.post(f"/sessions/{world.sid}/compact", json={})
    after = scrape(client)
    runs = value(after, "ctxstore_compaction_runs_total", trigger="request") - value(
        before, "ctxstore_compaction_runs_total", trigger="request"
    )
    assert runs == 1
    assert r.status_code == 201, r.text
    assert value(after, "ctxstore_compaction_folded_tokens_total") > value(
        before, "ctxstore_compaction_folded_tokens_total"
    )
    calls = value(after, "ctxstore_summarizer_calls_total", kind="extractive", outcome="ok")
    assert calls > value(before, "ctxstore_summarizer_calls_total", kind="extractive",
                         outcome="ok")  # fmt: skip


@pytest.fixture
def keyed(runtime: Any) -> Iterator[tuple[KeyStore, str, str]]:
    keys = KeyStore(runtime.store.engine)
    yield keys, keys.create("acme", "read")[1], keys.create("acme", "admin")[1]


def test_scrape_access_is_open_on_loopback_and_wants_a_key_scope_otherwise(
    runtime: Any, keyed: tuple[KeyStore, str, str]
) -> None:
    _, read, admin = keyed
    app = create_app(runtime)
    with TestClient(app, base_url=LOCAL) as local:
        assert local.get("/metrics").status_code == 200  # a loopback scraper, no key
    with TestClient(app, base_url=LOCAL, client=("10.1.2.3", 5000)) as remote:
        assert remote.get("/metrics").status_code == 401
        assert remote.get("/metrics", headers={"Authorization": f"Bearer {read}"}
                          ).status_code == 403  # fmt: skip
        assert remote.get("/metrics", headers={"Authorization": f"Bearer {admin}"}
                          ).status_code == 200  # fmt: skip
        assert remote.get("/ready").status_code == 200  # public, like /health
    keyed_only = create_app(runtime, ops=Operations(metrics_access="key", metrics_scope="read"))
    with TestClient(keyed_only, base_url=LOCAL) as local:
        assert local.get("/metrics").status_code == 401
        assert local.get("/metrics", headers={"Authorization": f"Bearer {read}"}
                         ).status_code == 200  # fmt: skip


def test_bad_settings_are_refused_by_name() -> None:
    for env in ({"CTXSTORE_METRICS_ACCESS": "lan"}, {"CTXSTORE_METRICS_SCOPE": "root"},
                {"CTXSTORE_READY_MAX_LAG": "-1"}, {"CTXSTORE_LOG_FORMAT": "xml"}):  # fmt: skip
        with pytest.raises(ValueError, match=next(iter(env))):
            Operations.from_env(env)


def test_the_dashboard_and_the_docs_name_only_metrics_that_exist(client: TestClient) -> None:
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    families = {f.name for f in text_string_to_metric_families(client.get("/metrics").text)}
    for text in ((docs / "grafana" / "ctxstore.json").read_text(),
                 (docs / "operations.md").read_text()):  # fmt: skip
        named = set(re.findall(r"ctxstore_[a-z_]+", text))
        bare = {re.sub(r"_(bucket|count|sum|total)$", "", n) for n in named}
        assert bare and bare <= families, bare - families
    listed = set(re.findall(r"^\| `(ctxstore_[a-z_]+)`", (docs / "operations.md").read_text(),
                            re.M))  # fmt: skip
    ours = {f for f in families if f.startswith("ctxstore_")}
    assert {re.sub(r"_total$", "", n) for n in listed} == ours  # every metric documented
