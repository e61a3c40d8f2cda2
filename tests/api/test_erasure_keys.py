"""Erasure takes the idempotency keys' records with it, and keys expire.

A key's claim keeps the answer its command got (a tool description, the
summarizer's instructions) and a hash of the request: after ``DELETE`` no
byte of the store holds either, and resending an erased command's key
answers as a new key would (404 on the erased session; ``POST /sessions``
starts a new session).  A key is remembered ``CTXSTORE_IDEMPOTENCY_TTL``;
the clock is the runtime's, set here instead of sleeping.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from api.app import create_app
from domain.idempotency import CREATED_TOPIC as CREATED
from domain.idempotency import DEFAULT_TTL, ttl_from
from scripts import cli
from service.key_expiry import forget_expired_keys
from tests.api.conftest import LOCAL
from tests.api.test_erasure import _store_text
from tests.conftest import opened_app


def _key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


def _keyed_commands(client: TestClient, marker: str) -> tuple[str, dict[str, Any]]:
    """A session started, appended to, given tools and instructions, each with a key."""
    started = client.post("/sessions", json={"title": "t"}, headers=_key("k-start"))
    assert started.status_code == 201
    sid = started.json()["session_id"]
    sent = {
        "k-node": (f"/sessions/{sid}/nodes", {"role": "user", "output": "hello"}),
        "k-batch": (f"/sessions/{sid}/nodes/batch",
                    {"nodes": [{"role": "assistant", "output": "a"}]}),
        "k-tools": (f"/sessions/{sid}/tools",
                    {"tools": [{"name": "probe", "description": f"does {marker} things"}]}),
        "k-compaction": (f"/sessions/{sid}/compaction",
                         {"instructions": f"keep {marker} verbatim"}),
    }  # fmt: skip
    for key, (path, body) in sent.items():
        answer = client.post(path, json=body, headers=_key(key))
        assert answer.status_code in (200, 201), answer.text
        assert client.post(path, json=body, headers=_key(key)).content == answer.content
    return sid, sent


def test_erasing_a_session_forgets_its_keys(client: TestClient, store_url: str) -> None:
    marker = f"MARK{secrets.token_hex(8)}"
    sid, sent = _keyed_commands(client, marker)
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    claims = runtime.app.recorder.select_notifications(start=1, limit=1000, topics=[CREATED])
    hashes = [runtime.app.mapper.to_domain_event(n).fingerprint.encode() for n in claims]
    assert len(hashes) == 5
    before = _store_text(store_url)
    assert marker.encode() in before and all(h in before for h in hashes)  # the claims
    assert client.delete(f"/sessions/{sid}").status_code == 200
    store = _store_text(store_url)
    assert marker.encode() not in store
    assert marker[4:].encode() not in store
    assert not any(h in store for h in hashes)  # no hash to confirm a guess of the content
    for key, (path, body) in sent.items():  # as for a session that never existed
        again = client.post(path, json=body, headers=_key(key))
        assert again.status_code == 404, (key, again.text)
        assert marker not in again.text
    restarted = client.post("/sessions", json={"title": "t"}, headers=_key("k-start"))
    assert restarted.status_code == 201  # a new key: a new session
    assert restarted.json()["session_id"] != sid


def test_erasing_a_tenant_forgets_its_keys(client: TestClient, store_url: str) -> None:
    marker = f"MARK{secrets.token_hex(8)}"
    sid, _ = _keyed_commands(client, marker)
    assert client.delete("/tenant", params={"confirm": "default"}).status_code == 200
    assert marker.encode() not in _store_text(store_url)
    again = client.post("/sessions", json={"title": "t"}, headers=_key("k-start"))
    assert again.status_code == 201 and again.json()["session_id"] != sid


def test_a_key_expires_after_its_ttl(runtime: Any, store_url: str) -> None:
    now = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
    runtime.clock = lambda: now
    runtime.idempotency_ttl = timedelta(hours=1)
    with TestClient(create_app(runtime), base_url=LOCAL) as client:
        first = client.post("/sessions", json={}, headers=_key("k")).json()["session_id"]
        now += timedelta(minutes=59)  # still remembered, across a window's edge too
        assert client.post("/sessions", json={}, headers=_key("k")).json()["session_id"] == first
        now += timedelta(minutes=1)  # an hour old: forgotten, the key is new again
        second = client.post("/sessions", json={}, headers=_key("k")).json()["session_id"]
        assert second != first
        now += timedelta(minutes=30)
        assert client.post("/sessions", json={}, headers=_key("k")).json()["session_id"] == second
        now += timedelta(minutes=30)
        third = client.post("/sessions", json={}, headers=_key("k"))
        assert third.status_code == 201 and third.json()["session_id"] not in (first, second)
        # an erasure deletes expired claims of every session, not only the erased one's
        now += timedelta(hours=2)
        other = client.post("/sessions", json={}).json()["session_id"]
        assert client.delete(f"/sessions/{other}").status_code == 200
    claims = runtime.app.recorder.select_notifications(start=1, limit=1000, topics=[CREATED])
    assert claims == []


def test_the_ttl_setting() -> None:
    assert ttl_from(None) == DEFAULT_TTL == timedelta(hours=24)
    assert ttl_from("90") == timedelta(seconds=90)
    assert ttl_from("15m") == timedelta(minutes=15)
    assert ttl_from("7d") == timedelta(days=7)
    for bad in ("0", "-1h", "soon", "1w"):
        with pytest.raises(ValueError, match="CTXSTORE_IDEMPOTENCY_TTL"):
            ttl_from(bad)


def test_expired_keys_are_deleted_without_an_erasure(runtime: Any, store_url: str) -> None:
    marker = f"MARK{secrets.token_hex(8)}"
    now = datetime.now(UTC) - timedelta(days=2)
    runtime.clock = lambda: now
    with TestClient(create_app(runtime), base_url=LOCAL) as client:
        sid, _ = _keyed_commands(client, marker)
        now += timedelta(hours=23)
        live = client.post(f"/sessions/{sid}/nodes", json={"role": "user", "output": "x"},
                           headers=_key("k-live"))  # fmt: skip
        assert live.status_code == 201
        client.post(f"/sessions/{sid}/nodes", json={"role": "user", "output": "y"})
    now += timedelta(hours=2)  # the first five are 25 h old, the last one 2 h
    assert forget_expired_keys(runtime) == {"forgotten": 5, "compacted": True}
    left = runtime.app.recorder.select_notifications(start=1, limit=1000, topics=[CREATED])
    assert [runtime.app.mapper.to_domain_event(n).key for n in left] == ["k-live"]
    # the marker stays in the session itself (the tool description), but no claim holds it
    assert all(marker not in n.state.decode(errors="replace") for n in
               runtime.app.recorder.select_notifications(start=1, limit=1000) if
               n.topic.startswith("domain.idempotency"))  # fmt: skip
    # and from the command line, on the real clock: "k-live" is 25 h old by now
    runtime.close()
    assert cli.main(["erase", "--expired-keys", "--db", store_url]) == 0
    with opened_app(store_url) as app:
        assert app.recorder.select_notifications(start=1, limit=1000, topics=[CREATED]) == []


def test_an_answer_recorded_as_its_session_was_erased_is_never_sent(
    runtime: Any, store_url: str
) -> None:
    marker = f"MARK{secrets.token_hex(8)}"
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    runtime.clock = lambda: now
    erased: list[str] = []

    def late(pending: Any, status: int, body: str) -> None:
        """The DELETE lands between the command and the record of its answer."""
        if not erased:
            erased.append(json.loads(body)["session_id"])
            assert client.delete(f"/sessions/{erased[0]}").status_code == 200
            runtime.app.record_answer(pending.claim_id, status, body, runtime.clock())
        else:
            original(pending, status, body)

    original, runtime.record_answer = runtime.record_answer, late
    with TestClient(create_app(runtime), base_url=LOCAL) as client:
        send = {"json": {"title": marker}, "headers": _key("k-race")}
        assert client.post("/sessions", **send).status_code == 201  # type: ignore[arg-type]
        now += timedelta(seconds=1)
        again = client.post("/sessions", **send)  # type: ignore[arg-type]
        now += timedelta(seconds=1)
        third = client.post("/sessions", **send)  # type: ignore[arg-type]
        assert again.status_code == third.status_code == 201
        assert again.json()["session_id"] == third.json()["session_id"] != erased[0]
        assert client.delete(f"/sessions/{third.json()['session_id']}").status_code == 200
    assert marker.encode() not in _store_text(store_url)


def test_an_answer_left_without_its_claim_goes_with_the_next_erasure(
    runtime: Any, store_url: str
) -> None:
    marker = f"MARK{secrets.token_hex(8)}"

    def late(pending: Any, status: int, body: str) -> None:
        assert client.delete(f"/sessions/{json.loads(body)['session_id']}").status_code == 200
        runtime.app.record_answer(pending.claim_id, status, body, runtime.clock())

    runtime.record_answer = late
    with TestClient(create_app(runtime), base_url=LOCAL) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        tools = {"tools": [{"name": "probe", "description": f"does {marker} things"}]}
        declared = client.post(f"/sessions/{sid}/tools", json=tools, headers=_key("k-orphan"))
        assert declared.status_code == 200 and marker in declared.text
        assert marker.encode() in _store_text(store_url)  # the answer, with no claim
        other = client.post("/sessions", json={}).json()["session_id"]
        assert client.delete(f"/sessions/{other}").status_code == 200
    assert marker.encode() not in _store_text(store_url)
