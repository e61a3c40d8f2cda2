"""What the inspector page reads beyond the original queries, on both stores.

A commit's own audit rows (``/commits/{cid}/transitions``), the occupancy
record's breakdown (one record for the ring and its table), the heads a
merge or attach node brings in (``joins`` in ``/dag``), and the page's
static files.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from api.app import create_app
from domain.policy import Policy
from service.runtime import Runtime
from tests.api.conftest import LOCAL
from tests.ui.scenario import TOUR_POLICY, Tour, build


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    """The tour's rules: each rule in a commit of its own (see ``TOUR_POLICY``)."""
    runtime = Runtime(store_url, policy=Policy.from_json(TOUR_POLICY))
    try:
        with TestClient(create_app(runtime), base_url=LOCAL) as c:
            yield c
    finally:
        runtime.close()


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def transitions(c: TestClient, sid: str, cid: str) -> list[dict[str, Any]]:
    body = ok(c.get(f"/sessions/{sid}/commits/{cid}/transitions"))
    assert body["session_id"] == sid and body["commit_id"] == cid
    rows: list[dict[str, Any]] = body["transitions"]
    return rows


def test_commit_transitions_are_the_audit_rows_of_that_commit(client: TestClient) -> None:
    tour = build(client)
    c, s = client, tour.sid
    timeline = ok(c.get(f"/sessions/{s}/timeline"))["commits"]
    by_commit = {e["commit_id"]: transitions(c, s, e["commit_id"]) for e in timeline}

    # Every audit row explain shows for a node is the row of exactly one commit.
    for node in ("t1", "t7"):
        why = ok(c.get(f"/sessions/{s}/explain/{node}"))["transitions"]
        assert why
        for row in why:
            listed = by_commit[row["commit_id"]]
            assert {k: v for k, v in row.items() if k != "commit_id"} in [
                {k: v for k, v in r.items() if k != "source_node_id"} for r in listed
            ]

    # t1: aged by the tail window, cleared in the emergency, then summarized.
    rules = [r["rule"] for r in ok(c.get(f"/sessions/{s}/explain/t1"))["transitions"]]
    assert rules == ["tool_aging", "emergency_clearing", "summarize"]
    head = ok(c.get(f"/sessions/{s}/context"))
    assert transitions(c, s, head["id"]) == [{
        "item_id": "t7", "source_node_id": "t7", "from_state": "full", "to_state": "aged",
        "rule": "tool_aging", "rules_version": head["rules_version"],
        "event_id": head["event_id"], "event_seq": head["event_seq"],
        "inputs": "assistant turns since: 4 > tail 3",
    }]  # fmt: skip
    first = timeline[0]["commit_id"]
    assert transitions(c, s, first) == []

    # A commit is read through its own session only, as /commits/{cid} is.
    branch_commit = ok(c.get(f"/sessions/{tour.branch_sid}/context"))["id"]
    for path in (f"/sessions/{s}/commits/{branch_commit}/transitions",
                 f"/sessions/{s}/commits/{'0' * 32}/transitions"):  # fmt: skip
        assert ok(c.get(path), 404)["error"]["code"] == "not_found"
    missing = c.get(f"/sessions/00000000-0000-0000-0000-000000000000/commits/{first}/transitions")
    assert ok(missing, 404)["error"]["code"] == "session_not_found"
    assert ok(c.get(f"/sessions/{s}/commits/{first}/transitions?x=1"), 422)


def check_breakdown(occ: dict[str, Any], budget: dict[str, Any]) -> dict[str, Any]:
    b: dict[str, Any] = occ["breakdown"]
    assert b["system"] + b["tools"] + b["history"] == occ["total_used"]
    assert (b["system"] + b["tools"] + b["history"] + b["output_reserve"] + b["free"] - b["over"]
            == occ["window"])  # fmt: skip
    assert b["output_reserve"] == budget["output_reserve"]
    assert (b["history_budget"], b["compact_at"], b["emergency_at"]) == (
        budget["history"], budget["compact_at"], budget["emergency_at"])  # fmt: skip
    return b


def test_occupancy_carries_the_breakdown_of_its_own_total(client: TestClient) -> None:
    tour: Tour = build(client)
    c, s = client, f"/sessions/{tour.sid}"
    occ, budget = ok(c.get(f"{s}/occupancy")), ok(c.get(f"{s}/budget"))
    b = check_breakdown(occ, budget)
    # The estimate is the commit's items plus the tool definitions the request lists.
    assert occ["basis"] == "estimated"
    assert occ["total_used"] == occ["estimated"] + budget["tools"]
    assert (b["system"], b["tools"], b["history"]) == (
        budget["used"]["system"], budget["used"]["tools"], budget["used"]["history"])  # fmt: skip
    assert b["free"] > 0 and b["over"] == 0

    # Measured: system and tools as counted, history is the rest of the provider's total.
    ok(c.post(f"{s}/usage", json={"request_id": "r1", "input_tokens": 4000, "cache_read": 100}),
       201)  # fmt: skip
    occ = ok(c.get(f"{s}/occupancy"))
    b = check_breakdown(occ, budget)
    assert occ["basis"] == "measured" and occ["total_used"] == 4100
    assert b["history"] == 4100 - budget["used"]["system"] - budget["used"]["tools"]
    assert b["over"] == 4100 - (occ["window"] - b["output_reserve"]) and b["free"] == 0

    # A report below even the counted parts cannot be split as counted: in proportion.
    ok(c.post(f"{s}/usage", json={"request_id": "r2", "input_tokens": 7}), 201)
    occ = ok(c.get(f"{s}/occupancy"))
    b = check_breakdown(occ, budget)
    assert b["history"] == 0 and b["system"] + b["tools"] == 7


def test_dag_joins_name_the_heads_a_merge_and_an_attach_bring_in(client: TestClient) -> None:
    tour = build(client)
    nodes = {n["node_id"]: n for n in ok(client.get(f"/sessions/{tour.sid}/dag"))["nodes"]}
    assert nodes[tour.merge]["joins"] == [{"session_id": tour.branch_sid, "node_id": "b2"}]
    assert nodes[tour.attach]["joins"] == [{"session_id": tour.notes_sid, "node_id": "n1"}]
    assert all(n["joins"] == [] for k, n in nodes.items() if k not in (tour.merge, tour.attach))
    assert (nodes["a7r"]["version"], nodes["a7r"]["versions"]) == (2, 2)


def test_the_inspector_page_and_only_its_files_are_served(client: TestClient) -> None:
    page = client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/ui/app.js">' in page.text
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        asset = client.get(f"/ui/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    assert client.get("/ui/", follow_redirects=False).headers["location"] == "/ui"
    for path in ("/ui/nope.js", "/ui/..%2Fapp.py", "/ui/__init__.py"):
        assert ok(client.get(path), 404)["error"]["code"] == "not_found"
    assert "/ui" not in ok(client.get("/openapi.json"))["paths"]
