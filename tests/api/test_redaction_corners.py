"""The corners redaction missed: ``/stream``'s occupancy, metadata keys, ``replay``'s title.

With ``redact_secrets`` on, ``/occupancy`` masked a model name holding a
token but ``/stream`` (live and ``?once=1``) sent it raw; a secret used as a
metadata *key* showed in ``/nodes`` and ``/events``; ``ctxstore replay``
without ``--render`` printed the title as written.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from api.app import create_app
from scripts import cli
from tests.api.conftest import IMMEDIATE_POLICY_JSON, serving
from tests.api.test_commands import ok
from tests.api.test_redaction import SECRETS, Recording, _runtime

TOKEN = SECRETS["github_token"]
REDACTING = json.dumps({**json.loads(IMMEDIATE_POLICY_JSON), "redact_secrets": True})


@pytest.fixture
def redacting(store_url: str) -> Any:
    rt = _runtime(store_url, True, Recording())
    try:
        with TestClient(create_app(rt), base_url="http://localhost") as client:
            yield client
    finally:
        rt.close()


def _marked_session(client: Any) -> str:
    body = {"title": f"deploy {TOKEN}", "model": f"openai:{TOKEN}"}
    sid: str = ok(client.post("/sessions", json=body), 201)["session_id"]
    ok(client.post(f"/sessions/{sid}/nodes", json={"role": "user", "input": "hi"}), 201)
    return sid


def test_the_streams_occupancy_is_masked_once(redacting: TestClient) -> None:
    sid = _marked_session(redacting)
    assert TOKEN not in redacting.get(f"/sessions/{sid}/occupancy").text
    once = redacting.get(f"/sessions/{sid}/stream", params={"once": 1})
    assert once.status_code == 200 and "event: occupancy" in once.text
    assert "[REDACTED:github_token]" in once.text and TOKEN not in once.text


def test_the_live_streams_occupancy_is_masked(store_url: str) -> None:
    with serving(store_url, CTXSTORE_POLICY=REDACTING) as base, httpx.Client(base_url=base) as c:
        sid = _marked_session(c)
        seen: list[str] = []
        with c.stream("GET", f"/sessions/{sid}/stream", params={"interval": 0.05},
                      timeout=30) as stream:  # fmt: skip
            for line in stream.iter_lines():
                seen.append(line)
                if line == "event: timeline":  # the opening frames are sent: change it
                    more = {"role": "assistant", "output": "a longer answer"}
                    ok(c.post(f"/sessions/{sid}/nodes", json=more), 201)
                if line.startswith("data:") and seen.count("event: occupancy") == 2:
                    break  # the live one, after the change
        occupancies = [seen[i + 1] for i, line in enumerate(seen) if line == "event: occupancy"]
        assert len(occupancies) == 2  # the opening one and the live one
        assert all("[REDACTED:github_token]" in data for data in occupancies)
        assert not any(TOKEN in line for line in seen)


def test_a_secret_as_a_metadata_key_is_masked(redacting: TestClient) -> None:
    sid = _marked_session(redacting)
    body = {"role": "user", "input": "x", "metadata": {TOKEN: "v", "plain": TOKEN}}
    node = ok(redacting.post(f"/sessions/{sid}/nodes", json=body), 201)["node_id"]
    for path in ("/nodes", "/events"):
        text = redacting.get(f"/sessions/{sid}{path}").text
        assert TOKEN not in text, path
    shown = {n["node_id"]: n for n in ok(redacting.get(f"/sessions/{sid}/nodes"))["nodes"]}
    assert shown[node]["metadata"] == {"[REDACTED:github_token]": "v",
                                       "plain": "[REDACTED:github_token]"}  # fmt: skip


def test_replay_masks_the_title(store_url: str, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    rt = _runtime(store_url, True, Recording())
    try:
        with TestClient(create_app(rt), base_url="http://localhost") as client:
            sid = _marked_session(client)
    finally:
        rt.close()
    capsys.readouterr()
    monkeypatch.setenv("CTXSTORE_POLICY", REDACTING)
    assert cli.main(["replay", sid, "--to", "2", "--db", store_url]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["title"] == "deploy [REDACTED:github_token]" and state["session_id"] == sid
    assert TOKEN not in json.dumps(state)
    monkeypatch.setenv("CTXSTORE_POLICY", IMMEDIATE_POLICY_JSON)  # off: as written
    assert cli.main(["replay", sid, "--to", "2", "--db", store_url]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == f"deploy {TOKEN}"
