"""``GET /sessions/{sid}/explain/{nid}`` on a summarized node: what survived of
it, masked like every other read when the policy redacts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from starlette.testclient import TestClient

from api.app import create_app
from service.runtime import Runtime
from tests.api.test_commands import ok
from tests.api.test_redaction import SECRETS
from tests.conftest import immediate_policy

SAID = f"The key is {SECRETS['openai_key']} for the staging account in eu-west-1."


def test_what_survived_of_a_node_reads_masked(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False,
                 policy=immediate_policy(redact_secrets=True))  # fmt: skip
    try:
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=64_000)
        clock = datetime(2026, 4, 1, 9, tzinfo=UTC)
        turns = [("user", "Read the settings, then go on."), ("assistant", "Reading."),
                 ("user", SAID)]  # fmt: skip
        turns += [t for n in range(6) for t in (("assistant", f"Step {n}: working on it."),
                                                ("user", f"Carry on with part {n}."))]  # fmt: skip
        nodes = []
        for n, (role, text) in enumerate(turns):
            field = "input" if role == "user" else "output"
            node, _ = rt.execute("append_node", sid, role=role, at=clock + timedelta(seconds=n),
                                 **{field: text})  # fmt: skip
            nodes.append(str(node))
        summary_id = rt.compact(str(sid))["summary_id"]
        with TestClient(create_app(rt), base_url="http://localhost") as client:
            r = client.get(f"/sessions/{sid}/explain/{nodes[2]}")
            why = ok(r)
        assert why["current"]["state"] == "summarized"
        assert why["summarized_by"] == summary_id
        assert why["survived"] == ["- user: key [REDACTED:openai_key] staging account eu-west-1."]
        assert SECRETS["openai_key"] not in r.text
    finally:
        rt.close()
