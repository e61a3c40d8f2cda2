"""With ``redact_secrets`` on, no read route shows a secret; the log keeps it as written.

A session whose title, node content, tool output and metadata carry the
secrets of ``test_redaction``; every read a client has (each session route
that returns content, the session list, the replay feed, the export) is
free of them and still names the nodes by their ids, so a client can
address them.  Reading the event store itself finds the secrets: redaction
is a read-side projection.  Items committed before redaction was on are
masked too.  An admin key reads masked like any other.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import pytest
from starlette.testclient import TestClient

from api.app import create_app
from service.api_keys import KeyStore
from service.event_json import event_to_json
from tests.api.test_commands import ok
from tests.api.test_redaction import PASTED, SECRETS, Recording, _runtime

# every session route that returns a session's content (the rest carry ids and counts)
READS = ("", "/nodes", "/events", "/dag", "/tools", "/context", "/timeline", "/render",
         "/occupancy")  # fmt: skip


def _seed(client: TestClient, h: dict[str, str]) -> tuple[str, str, str]:
    title = f"deploy {SECRETS['aws_access_key']}"
    sid = ok(client.post("/sessions", headers=h, json={"title": title}), 201)["session_id"]

    def node(body: dict[str, Any]) -> str:
        return ok(client.post(f"/sessions/{sid}/nodes", headers=h, json=body), 201)["node_id"]

    pasted = node({"role": "user", "input": PASTED,
                   "metadata": {"note": f"token {SECRETS['github_token']}"}})  # fmt: skip
    caller = node({"role": "assistant", "output": "reading .env"})
    node({"role": "tool", "name": "read_env", "caller": caller, "input": {"path": ".env"},
          "output": f"OPENAI_API_KEY={SECRETS['openai_key']}"})  # fmt: skip
    ok(client.post(f"/sessions/{sid}/tools", headers=h, json={"tools": [
        {"name": "deploy", "description": f"uses {SECRETS['slack_token']}",
         "input_schema": {"type": "object"}}]}))  # fmt: skip
    return sid, pasted, caller


def _clean(text: str) -> bool:
    return not any(v in text or json.dumps(v)[1:-1] in text for v in SECRETS.values())


def test_every_read_is_masked_and_the_log_is_not(store_url: str) -> None:
    rt = _runtime(store_url, True, Recording())
    try:
        admin = {"Authorization": f"Bearer {KeyStore(rt.store.engine).create('a', 'admin')[1]}"}
        with TestClient(create_app(rt), base_url="http://localhost", headers=admin) as client:
            sid, pasted, caller = _seed(client, {})
            commit = ok(client.get(f"/sessions/{sid}/context"))["id"]
            paths = [f"/sessions/{sid}{p}" for p in READS] + [
                "/sessions", f"/sessions/{sid}/commits/{commit}",
                f"/sessions/{sid}/commits/{commit}/transitions",
                f"/sessions/{sid}/explain/{pasted}",
            ]  # fmt: skip
            for path in paths:
                text = ok(client.get(path)).__repr__() + client.get(path).text
                assert _clean(text), path
            nodes = ok(client.get(f"/sessions/{sid}/nodes"))["nodes"]
            shown = {n["node_id"]: n for n in nodes}
            assert "[REDACTED:anthropic_key]" in shown[pasted]["input"]
            assert "please fix it" in shown[pasted]["input"]
            assert shown[pasted]["metadata"]["note"] == "token [REDACTED:github_token]"
            assert ok(client.get(f"/sessions/{sid}"))["title"] == "deploy [REDACTED:aws_access_key]"
            # ids are never masked: the nodes are still addressable
            assert ok(client.get(f"/sessions/{sid}/explain/{caller}"))["node_id"] == caller
            feed = ok(client.get(f"/sessions/{sid}/events"))["events"]
            assert feed[1]["data"]["node_id"] == pasted
            assert "[REDACTED:private_key]" in feed[1]["data"]["input"]
        # the log itself keeps every byte as written
        stored = json.dumps([event_to_json(e) for e in rt.app.events_of(UUID(sid))])
        assert SECRETS["anthropic_key"] in stored and SECRETS["aws_access_key"] in stored
    finally:
        rt.close()


@pytest.mark.parametrize("redact", [False, True])
def test_items_committed_before_redaction_was_on_read_masked_after(
    store_url: str, redact: bool
) -> None:
    before = _runtime(store_url, False, Recording())
    try:
        with TestClient(create_app(before), base_url="http://localhost") as client:
            sid, _, _ = _seed(client, {})
    finally:
        before.close()
    after = _runtime(store_url, redact, Recording())
    try:
        with TestClient(create_app(after), base_url="http://localhost") as client:
            for path in ("/context", "/nodes", "/events", ""):
                text = client.get(f"/sessions/{sid}{path}").text
                assert _clean(text) is redact, path
    finally:
        after.close()
