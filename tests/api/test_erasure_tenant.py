"""``DELETE /tenant`` and ``ctxstore erase --tenant``: every session of one tenant, none other.

Tenant ``acme`` holds two sessions, a branch and an attach between them,
all carrying a random marker; ``globex`` holds one.  Erasing acme leaves
one audit record per erased session (with its branches), no byte of the
marker in the store, globex's rows and render exactly as they were, acme's
keys working on an empty tenant, and a rebuild equal to the live tables.
A second erasure erases nothing and says so.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from api.app import create_app
from projections import tables as t
from projections.rebuild import rebuild_and_compare
from scripts import cli
from service.api_keys import KeyStore
from tests.api.test_commands import ok
from tests.api.test_erasure import _store_text


def _rows(runtime: Any, session_id: str) -> list[Any]:
    with runtime.store.engine.connect() as conn:
        return [tuple(r) for table in (t.sessions, t.nodes, t.commits, t.transitions, t.recall)
                for r in conn.execute(select(table).where(table.c.session_id == session_id)
                                      .order_by(*table.primary_key.columns))]  # fmt: skip


def _session(client: TestClient, h: dict[str, str], text: str) -> str:
    sid = ok(client.post("/sessions", json={"title": text}, headers=h), 201)["session_id"]
    for i in range(2):
        for body in ({"role": "user", "input": f"{text} asks {i}"},
                     {"role": "assistant", "output": f"{text} answers {i}"}):  # fmt: skip
            ok(client.post(f"/sessions/{sid}/nodes", headers=h, json=body), 201)
    return sid


def test_erasing_a_tenant_takes_all_its_sessions_and_nothing_else(
    runtime: Any, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = KeyStore(runtime.store.engine)
    admin = {
        n: {"Authorization": f"Bearer {keys.create(n, 'admin')[1]}"} for n in ("acme", "globex")
    }
    writer = {"Authorization": f"Bearer {keys.create('acme', 'write')[1]}"}
    marker = "TENANT" + secrets.token_hex(12)
    with TestClient(create_app(runtime), base_url="http://localhost") as client:
        a1 = _session(client, admin["acme"], f"one {marker}")
        a2 = _session(client, admin["acme"], f"two {marker}")
        head = ok(client.get(f"/sessions/{a1}", headers=admin["acme"]))["head"]
        branch = ok(client.post(f"/sessions/{a1}/branch", json={"node_id": head},
                                headers=admin["acme"]), 201)["session_id"]  # fmt: skip
        ok(client.post(f"/sessions/{a2}/attach", json={"source_session": a1},
                       headers=admin["acme"]), 201)  # fmt: skip
        g = _session(client, admin["globex"], "globex keeps this")
        rows, render = _rows(runtime, g), client.get(f"/sessions/{g}/render",
                                                     headers=admin["globex"]).content  # fmt: skip
        assert marker.encode() in _store_text(store_url)

        # refused: a narrower key, no confirmation, the wrong one; nothing erased
        assert client.delete("/tenant", params={"confirm": "acme"},
                             headers=writer).status_code == 403  # fmt: skip
        missing = client.delete("/tenant", headers=admin["acme"])
        assert missing.status_code == 422
        assert missing.json()["error"]["code"] == "invalid_request"
        wrong = client.delete("/tenant", params={"confirm": "globex"}, headers=admin["acme"])
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "tenant_not_confirmed"
        assert client.get(f"/sessions/{a1}", headers=admin["acme"]).status_code == 200

        erased = ok(client.delete("/tenant", params={"confirm": "acme"}, headers=admin["acme"]))
        assert erased["tenant"] == "acme" and erased["compacted"] is True
        assert {r["erased_at"] for r in erased["erasures"]} == {erased["erased_at"]}
        records = {r["session_id"]: r for r in erased["erasures"]}
        assert set(records) == {a1, a2}
        assert set(records[a1]["erased_sessions"]) == {a1, branch}
        assert records[a2]["erased_sessions"] == [a2] and records[a1]["referrers"] == []
        assert all(r["tenant"] == "acme" and r["by"] != "local" for r in records.values())
        assert marker.encode() not in _store_text(store_url)

        for sid in (a1, a2, branch):
            assert client.get(f"/sessions/{sid}", headers=admin["acme"]).status_code == 404
        # acme's keys stay, on an empty tenant; its audit trail is its own
        assert ok(client.get("/sessions", headers=writer))["sessions"] == []
        trail = ok(client.get("/erasures", headers=admin["acme"]))["erasures"]
        assert sorted(e["session_id"] for e in trail) == sorted([a1, a2])
        assert ok(client.get("/erasures", headers=admin["globex"]))["erasures"] == []
        # globex: untouched, row for row
        assert _rows(runtime, g) == rows
        assert client.get(f"/sessions/{g}/render", headers=admin["globex"]).content == render

        again = ok(client.delete("/tenant", params={"confirm": "acme"}, headers=admin["acme"]))
        assert again["erasures"] == [] and again["reprojected"] == 0
        assert len(ok(client.get("/erasures", headers=admin["acme"]))["erasures"]) == 2
    assert rebuild_and_compare(store_url)["identical"] is True

    # the command line, for any tenant: globex's one session
    assert cli.main(["erase", "--tenant", "globex", "--db", store_url]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [r["session_id"] for r in printed["erasures"]] == [g]
    assert printed["erasures"][0]["by"] == "cli"
    assert cli.main(["erase", g, "--tenant", "globex", "--db", store_url]) == 2
    assert rebuild_and_compare(store_url)["identical"] is True


def test_without_keys_the_local_caller_erases_the_default_tenant(client: TestClient) -> None:
    sid = _session(client, {}, "local")
    erased = ok(client.delete("/tenant", params={"confirm": "default"}))
    assert [r["session_id"] for r in erased["erasures"]] == [sid]
    assert erased["erasures"][0]["by"] == "local"
    assert client.get(f"/sessions/{sid}").status_code == 404
