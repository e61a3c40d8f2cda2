"""Redaction (``redact_secrets`` in the policy): secrets masked where they leave the store.

With it on, a node carrying API keys, a Bearer token and a PEM private key
renders masked, is exported masked, reaches the summarizer masked, and the
audit trail says rule ``redact`` masked it; the replay feed shows it masked
while the event log keeps it as written, and a rebuild equals the live
tables.  Off (the default) nothing changes: same rules_version as before
redaction existed, secrets verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

import service.runtime as runtime_module
from api.app import create_app
from domain.policy import Policy
from projections.rebuild import rebuild_and_compare
from scripts import cli
from tests.api.test_commands import append, ok, start
from tests.conftest import IMMEDIATE_POLICY_JSON, immediate_policy

SECRETS = {
    "openai_key": "sk-proj-Zq9Xw8Vu7Ts6Rr5Qp4Oo3Nn2",
    "anthropic_key": "sk-ant-api03-Ab1Cd2Ef3Gh4Ij5Kl6Mn7",
    "aws_access_key": "AKIAZ7Q2W3E4R5T6Y7U8",
    "github_token": "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2,
    "slack_token": "xoxb-112233445566-Zz9Yy8Xx7",
    "bearer_token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
    "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----",
}
PASTED = (f"here is my config: OPENAI={SECRETS['openai_key']} "
          f"ANTHROPIC={SECRETS['anthropic_key']} aws {SECRETS['aws_access_key']} "
          f"gh {SECRETS['github_token']} slack {SECRETS['slack_token']}\n"
          f"Authorization: Bearer {SECRETS['bearer_token']}\n{SECRETS['private_key']}\n"
          "please fix it")  # fmt: skip


class Recording:
    """A summarizer that keeps what it was sent."""

    name = "recording"

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def summarize(self, items: Any) -> str:
        self.seen.append(items)
        return "the user shared a configuration"


def _runtime(url: str, redact: bool, summarizer: Recording) -> Any:
    policy = immediate_policy(tail_turns=1, redact_secrets=redact)
    return runtime_module.Runtime(url, policy=policy, summarizer=summarizer)


@pytest.fixture
def redacting(store_url: str) -> Iterator[tuple[TestClient, Recording]]:
    summarizer = Recording()
    rt = _runtime(store_url, True, summarizer)
    try:
        with TestClient(create_app(rt), base_url="http://localhost") as c:
            yield c, summarizer
    finally:
        rt.close()


def _session(client: TestClient) -> tuple[str, str, str]:
    sid = start(client)
    append(client, sid, "user", input="hello")  # the first user turn is an anchor: never folded
    append(client, sid, "assistant", output="hi")
    secret = append(client, sid, "user", input=PASTED)
    append(client, sid, "assistant", output="Reading the environment.")
    tool = append(client, sid, "tool", name="read_env", input={"path": ".env"},
                  output=f"OPENAI_API_KEY={SECRETS['openai_key']}")  # fmt: skip
    append(client, sid, "assistant", output="I see the configuration.")
    for i in range(4):
        append(client, sid, "user", input=f"next step {i}")
        append(client, sid, "assistant", output=f"done {i}")
    return sid, secret, tool


def test_secrets_are_masked_in_render_summary_input_and_export_and_audited(
    redacting: tuple[TestClient, Recording], store_url: str,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    client, summarizer = redacting
    sid, secret, tool = _session(client)
    for shape in ("neutral", "openai", "anthropic"):
        rendered = json.dumps(ok(client.get(f"/sessions/{sid}/render", params={"shape": shape})))
        assert not any(value in rendered for value in SECRETS.values()), shape
        assert "[REDACTED:openai_key]" in rendered and "Bearer [REDACTED:bearer_token]" in rendered
        assert "please fix it" in rendered and "[REDACTED:private_key]" in rendered
    # the audit trail: rule redact, full -> full, naming the kinds and never a secret
    why = ok(client.get(f"/sessions/{sid}/explain/{secret}"))
    rows = [row for row in why["transitions"] if row["rule"] == "redact"]
    assert len(rows) == 1 and rows[0]["item_id"] == secret
    assert rows[0]["inputs"] == ("masked 7 secrets: anthropic_key, aws_access_key, bearer_token, "
                                 "github_token, openai_key, private_key, slack_token")  # fmt: skip
    assert [r["rule"] for r in ok(client.get(f"/sessions/{sid}/explain/{tool}"))["transitions"]
            if r["rule"] == "redact"] == ["redact"]  # fmt: skip
    # the replay feed is masked too; the log keeps the node as written
    # (no rule changes a node's content: tests/api/test_redaction_reads.py)
    feed = json.dumps(ok(client.get(f"/sessions/{sid}/events")))
    assert SECRETS["anthropic_key"] not in feed and "[REDACTED:anthropic_key]" in feed
    # the summarizer never sees a secret
    ok(client.post(f"/sessions/{sid}/compact", json={}), 201)
    sent = json.dumps(summarizer.seen)
    assert summarizer.seen and "[REDACTED:anthropic_key]" in sent
    assert not any(value in sent for value in SECRETS.values())
    # the export, with the same policy
    monkeypatch.setenv("CTXSTORE_POLICY", json.dumps({"redact_secrets": True}))
    assert cli.main(["export", sid, "--db", store_url]) == 0
    exported = capsys.readouterr().out
    assert "[REDACTED:private_key]" in exported and "please fix it" in exported
    assert not any(value in exported or json.dumps(value)[1:-1] in exported
                   for value in SECRETS.values())  # fmt: skip
    assert rebuild_and_compare(store_url)["identical"] is True


def test_a_render_masks_items_committed_before_redaction_was_on(store_url: str) -> None:
    summarizer = Recording()
    before = _runtime(store_url, False, summarizer)
    try:
        sid, _ = before.execute("start_session", "t")
        before.execute("append_node", sid, role="user", input=PASTED)
    finally:
        before.close()
    after = _runtime(store_url, True, summarizer)
    try:
        rendered = json.dumps(after.rendered(str(sid)))
        assert not any(value in rendered for value in SECRETS.values())
    finally:
        after.close()


def test_redaction_off_changes_nothing(runtime: Any, client: TestClient, store_url: str,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    # the default policy's rules_version: redaction off adds no new rules history
    # (issue 27 changed the defaults: r1-2ab1bcf578 and r1-cf0aaf9fec before; issue 30's
    # ``keep_thinking_turns``: a policy with it null digests as issue 27's defaults did;
    # then compaction later and deeper, r1-b4fd45b08b with the earlier three values)
    assert Policy().rules_version == "r1-cc93f3a373"
    earlier = Policy(compact_at=0.85, summary_target=0.35, summary_budget=0.4)
    assert earlier.rules_version == "r1-b4fd45b08b"  # a deployment that pins them keeps it
    assert Policy.from_json(IMMEDIATE_POLICY_JSON).rules_version == "r1-47c2c388dc"
    assert Policy(keep_thinking_turns=None).rules_version == "r1-ad2c858668"
    sid, secret, _ = _session(client)
    rendered = json.dumps(ok(client.get(f"/sessions/{sid}/render")))
    assert json.dumps(PASTED)[1:-1] in rendered
    assert all(r["rule"] != "redact" for r in ok(client.get(f"/sessions/{sid}/explain/{secret}"))
               ["transitions"])  # fmt: skip
    monkeypatch.delenv("CTXSTORE_POLICY", raising=False)
    assert cli.main(["export", sid, "--db", store_url]) == 0
    assert json.dumps(PASTED, ensure_ascii=True)[1:-1] in capsys.readouterr().out
