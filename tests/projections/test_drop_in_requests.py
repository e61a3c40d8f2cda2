"""Requests a provider takes as they are: content blocks, declared tools, the model's call ids.

A session holding images, a PDF, thinking blocks with signatures, tool
schemas and the model's own call ids renders in both shapes, and each shape
validates against the official SDK's request types (``anthropic`` and
``openai``, pydantic TypeAdapters over their params).  The thinking block
comes back byte for byte, the tools exactly as declared, and the budget
counts what the request carries.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from domain import errors
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.domain.test_content_blocks import png
from tests.projections.test_context_commit import add, at, by_id, start

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+" * 3
THINKING = {"type": "thinking", "thinking": "The regex stops after one unit.",
            "signature": SIGNATURE}  # fmt: skip
TOOLS = [
    {"name": "read_file", "description": "Read a file of the repository.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                      "required": ["path"]}},
    {"name": "screenshot", "description": "Capture the page.",
     "input_schema": {"type": "object", "properties": {}}},
]  # fmt: skip


@functools.cache
def validator(params: Any) -> Any:
    """The SDK's request type as the JSON schema pydantic derives from it.

    The SDK params are TypedDicts over ``Iterable``s, which pydantic checks
    only as they are read (and some nested ones cannot be read back); their
    JSON schema checks the whole request at once.
    """
    import jsonschema

    return jsonschema.Draft202012Validator(TypeAdapter(params).json_schema())


def valid(params: Any, request: dict[str, Any]) -> None:
    errors_found = sorted(validator(params).iter_errors(request), key=str)
    assert not errors_found, [e.message[:300] for e in errors_found[:3]]


def anthropic_ok(request: dict[str, Any]) -> None:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    valid(MessageCreateParamsNonStreaming, dict(request, max_tokens=1_024))  # caller's setting


def openai_ok(request: dict[str, Any]) -> None:
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    valid(CompletionCreateParamsNonStreaming, request)


def multimodal_session(rt: Runtime) -> str:
    sid = start(rt, model="anthropic:claude-sonnet-4")
    rt.execute("declare_tools", sid, TOOLS, at=at(0))
    add(rt, sid, "system", "You are a careful engineer.")
    add(rt, sid, "user", [{"type": "text", "text": "Why does this page break?"},
                          {"type": "image", "source": {"type": "base64",
                           "media_type": "image/png", "data": png(800, 600)}},
                          {"type": "document", "title": "spec.pdf", "source": {
                              "type": "base64", "media_type": "application/pdf",
                              "data": "JVBERi0xLjQgL1R5cGUgL1BhZ2U="}}], 1)  # fmt: skip
    add(rt, sid, "assistant", [THINKING, {"type": "text", "text": "Let me look."}], 2, node_id="a1")
    add(rt, sid, "tool", name="read_file", input={"path": "parse.py"}, output="def parse(): ...",
        call_id="toolu_01A09q90qw90lq917835lq9", minute=3)  # fmt: skip
    add(rt, sid, "tool", name="screenshot", input={}, call_id="call_0", minute=3,
        output=[{"type": "text", "text": "the page:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": png(1280, 720)}}])  # fmt: skip
    add(rt, sid, "assistant", "Once more.", 4)
    add(
        rt,
        sid,
        "tool",
        name="read_file",
        input={"path": "lex.py"},
        output="def lex(): ...",
        call_id="call_0",
        minute=5,
    )  # a second call_0 in the same request
    return sid


def test_both_shapes_validate_against_the_official_sdk_types(rt_thinking: Runtime) -> None:
    rt = rt_thinking  # the thinking of an older turn kept, to see it come back
    sid = multimodal_session(rt)
    anthropic = rt.rendered(sid, "anthropic")["request"]
    openai = rt.rendered(sid, "openai")["request"]
    anthropic_ok(anthropic)
    openai_ok(openai)
    anthropic_ok(rt.rendered(sid, "anthropic", cache=True)["request"])
    # thinking comes back byte for byte, first in its message
    assistant = anthropic["messages"][1]["content"]
    assert assistant[0] == THINKING
    assert json.dumps(THINKING) in json.dumps(anthropic)
    # the tools exactly as declared
    assert anthropic["tools"] == TOOLS
    assert [t["function"] for t in openai["tools"]] == [
        {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
        for t in TOOLS]  # fmt: skip
    # the model's own call ids, told apart where one repeats
    ids = [b["id"] for m in anthropic["messages"] for b in m["content"]
           if b["type"] == "tool_use"]  # fmt: skip
    assert ids[:2] == ["toolu_01A09q90qw90lq917835lq9", "call_0"]
    assert ids[2].startswith("call_0_") and len(set(ids)) == 3
    # images: native in both shapes
    user = anthropic["messages"][0]["content"]
    assert [b["type"] for b in user] == ["text", "image", "document"]
    parts = openai["messages"][1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "file"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    tool_msgs = [m for m in openai["messages"] if m["role"] == "tool"]
    assert tool_msgs[1]["content"] == "the page:\n[image]"
    assert any(isinstance(m["content"], list) and m["content"][1]["type"] == "image_url"
               for m in openai["messages"] if m["role"] == "user")  # fmt: skip


def test_the_budget_counts_images_thinking_and_tool_schemas(rt_thinking: Runtime) -> None:
    rt = rt_thinking  # the thinking of an older turn kept, to count it
    sid = multimodal_session(rt)
    budget = rt.budget(sid)
    from domain.tool_specs import definition_tokens

    listed = rt.rendered(sid, "neutral")["request"]["tools"]
    assert budget["tools"] == definition_tokens(listed) == definition_tokens(TOOLS)
    items = {i["source_node_id"]: i for i in rt.head_commit(sid)["items"]}
    first_user = next(i for i in items.values() if i["role"] == "user")
    assert first_user["tokens"] > 640 + 2_500, "an 800x600 image and a one-page PDF"
    assert items["a1"]["tokens"] > 10, "the thinking text counts"


def test_a_tool_result_with_blocks_ages_as_a_whole(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        sid = multimodal_session(rt)
        for n in range(4):
            add(rt, sid, "assistant", f"turn {n}", 6 + n)
        shot = next(i for i in rt.head_commit(sid)["items"] if i["name"] == "screenshot")
        assert shot["state"] == "aged" and shot["blocks"] is None
        assert shot["rendered"] == "[tool result: 2 lines, first: the page:]"
        anthropic_ok(rt.rendered(sid, "anthropic")["request"])
    finally:
        rt.close()


def test_tool_declarations_are_checked_and_versioned(rt: Runtime) -> None:
    sid = start(rt)
    for bad in (
        [{"name": "has space"}],
        [{"name": "x"}, {"name": "x"}],
        [{"name": "x", "input_schema": {"type": "array"}}],
        [{"title": "x"}],
    ):
        with pytest.raises(errors.InvalidCommand):
            rt.execute("declare_tools", sid, bad, at=at(0))
    rt.execute("declare_tools", sid, TOOLS, at=at(0))
    add(rt, sid, "user", "go", 1)
    first = rt.head_commit(sid)
    rt.execute("declare_tools", sid, TOOLS[:1], at=at(2))
    assert [t["name"] for t in rt.head_commit(sid)["tools"]] == ["read_file"]
    assert [t["name"] for t in rt.commit(sid, first["id"])["tools"]] == ["read_file", "screenshot"]
    assert rt.tools(sid)["tools"] == TOOLS[:1]
    branch, _ = rt.execute("branch", sid, by_id(rt, sid) and rt.head_commit(sid)["head_node_id"])
    assert rt.tools(str(branch))["tools"] == TOOLS[:1], "a branch offers its source's tools"
