"""The window promise over HTTP: /budget and /render say whether the request fits."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient


def post(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    response = client.post(path, json=body)
    assert response.status_code in (200, 201), response.text
    return response.json()


def test_budget_and_render_say_whether_the_request_fits(client: TestClient) -> None:
    sid = post(client, "/sessions", {"model": "openai:gpt-4o", "context_window": 4_000})[
        "session_id"
    ]
    s = f"/sessions/{sid}"
    post(client, f"{s}/nodes", {"role": "system", "input": "be brief"})
    for n in range(40):
        post(client, f"{s}/nodes", {"role": "user", "input": f"question {n} " + "w " * 80})
        post(client, f"{s}/nodes", {"role": "assistant", "output": f"answer {n} " + "w " * 80})
    budget = client.get(f"{s}/budget").json()
    assert budget["limit"] == budget["window"] - budget["output_reserve"]
    assert budget["request_tokens"] <= budget["limit"]
    assert (budget["over_window"], budget["shortfall"]) == (False, 0)
    render = client.get(f"{s}/render", params={"shape": "anthropic", "cache": "true"}).json()
    assert render["over_window"] is False
    assert render["request"]["messages"][-1]["content"][-1]["cache_control"] == {
        "type": "ephemeral"
    }
    # a system prompt alone past the window: the commit says so, and by how much
    post(client, f"{s}/model", {"model": "openai:gpt-4o", "context_window": 256})
    post(client, f"{s}/nodes", {"role": "system", "input": "rule " * 400})
    budget = client.get(f"{s}/budget").json()
    assert budget["over_window"] and budget["shortfall"] == budget["request_tokens"] - 224
    assert "system" in budget["over_window_reason"]
    assert client.get(f"{s}/render").json()["shortfall"] == budget["shortfall"]


def test_compaction_settings_over_http(client: TestClient) -> None:
    sid = post(client, "/sessions", {"model": "openai:gpt-4o"})["session_id"]
    body = {"instructions": "Keep file paths.", "summarizer_model": "gpt-4o-mini"}
    done = post(client, f"/sessions/{sid}/compaction", body)
    assert (done["instructions"], done["summarizer_model"], done["version"]) == (
        "Keep file paths.", "gpt-4o-mini", 2)  # fmt: skip
    listed = {s["session_id"]: s for s in client.get("/sessions").json()["sessions"]}
    assert listed[sid]["compaction"]["summarizer_model"] == "gpt-4o-mini"
    too_long = client.post(f"/sessions/{sid}/compaction", json={"instructions": "x" * 4_001})
    assert too_long.status_code == 422
    events = client.get(f"/sessions/{sid}/events").json()["events"]
    assert events[-1]["type"] == "CompactionConfigured"


def test_a_setting_left_out_keeps_its_value_and_null_clears_it(client: TestClient) -> None:
    """A client turning the recall tool on must not wipe the instructions it set before."""
    from ctxstore_client import Client

    sid = post(client, "/sessions", {"model": "openai:gpt-4o"})["session_id"]
    path, ctx = f"/sessions/{sid}/compaction", Client(http=client)
    post(client, path, {"instructions": "Keep file paths.", "summarizer_model": "small"})
    done = post(client, path, {"recall_tool": True})
    assert (done["instructions"], done["summarizer_model"], done["recall_tool"]) == (
        "Keep file paths.", "small", True)  # fmt: skip
    done = post(client, path, {"summarizer_model": None})
    assert (done["instructions"], done["summarizer_model"], done["recall_tool"]) == (
        "Keep file paths.", None, True)  # fmt: skip
    assert client.get(f"/sessions/{sid}").json()["compaction"] == {
        "instructions": "Keep file paths.",
        "summarizer_model": None,
        "recall_tool": True,
    }
    set_ = ctx.configure_compaction(sid, instructions=None)  # the client sends None as null
    assert (set_.instructions, set_.recall_tool) == (None, True)
    assert ctx.configure_compaction(sid, summarizer_model="big").recall_tool is True
    events = client.get(f"/sessions/{sid}/events").json()["events"]
    last = events[-1]["data"] if "data" in events[-1] else events[-1]
    assert last["recall_tool"] is True and last["summarizer_model"] == "big"  # all three kept


def test_recall_tool_per_session_over_http(client: TestClient) -> None:
    """``recall_tool`` on one session of a policy-off deployment: shown, listed, counted."""
    from api.client import Client
    from domain.tool_specs import RECALL_SPEC, definition_tokens

    sid = post(client, "/sessions", {"model": "openai:gpt-4o"})["session_id"]
    s = f"/sessions/{sid}"
    post(client, f"{s}/nodes", {"role": "user", "input": "hello"})
    done = post(client, f"{s}/compaction", {"recall_tool": True})
    assert (done["recall_tool"], done["instructions"]) == (True, None)
    assert client.get(s).json()["compaction"]["recall_tool"] is True
    render = client.get(f"{s}/render", params={"shape": "anthropic"}).json()
    assert render["request"]["tools"] == [RECALL_SPEC]
    assert client.get(f"{s}/budget").json()["tools"] == definition_tokens([RECALL_SPEC])
    for bad in ("yes", 1, [True]):
        refused = client.post(f"{s}/compaction", json={"recall_tool": bad})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "invalid_request"
    ctx = Client(http=client)
    off = ctx.configure_compaction(sid, recall_tool=False)
    assert off.recall_tool is False and ctx.budget(sid).tools == 0
    assert "tools" not in ctx.render(sid, shape="openai").request
    assert ctx.configure_compaction(sid).recall_tool is False  # naming nothing changes nothing
    assert ctx.configure_compaction(sid, recall_tool=None).recall_tool is None  # the policy's
    assert client.get(s).json()["compaction"] is None
