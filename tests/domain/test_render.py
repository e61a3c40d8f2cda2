"""Rendering a commit: pure, and well-formed for both provider shapes."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.call_ids import tool_call_id, tool_name
from domain.context import ContextCommit, Item
from domain.render import render_commit, render_shape

MODEL = "anthropic:claude-sonnet-4"
# What the providers accept (Anthropic ids and names; OpenAI's 40-char id limit).
PROVIDER_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")
PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def item(n: int, role: str, text: str, state: str = "full", **fields: Any) -> Item:
    return Item(item_id=fields.pop("item_id", f"i{n}"), source_node_id=f"n{n}", role=role,
                state=state, rendered=text, tokens=5, ord=(n + 1) * 1024, touched_at=0.0,
                **fields)  # fmt: skip


def commit(items: list[Item]) -> ContextCommit:
    return ContextCommit(
        id="c1", session_id="s1", parent_ids=("c0",), head_node_id=items[-1].item_id,
        rules_version="r1-test", total_tokens=sum(i.tokens for i in items), event_id="s1:9",
        event_seq=9, created_at=0.0, items=tuple(items),
    )  # fmt: skip


def sample() -> list[Item]:
    return [
        item(0, "system", "You are helpful."),
        item(1, "user", "Fix the bug."),
        item(2, "assistant", "Old reasoning.", state="summarized", merged_into="summary:1"),
        item(3, "tool", "old output", state="summarized", name="grep", call="{}",
             merged_into="summary:1"),
        item(4, "summary", "[Summary] read two files", state="summary", item_id="summary:1"),
        item(5, "assistant", "Reading the file."),
        item(6, "tool", "def f(): ...", name="read_file", call='{"path": "a.py"}'),
        item(7, "tool", "[tool result: 3 lines, first: x]", state="aged", name="grep",
             call='{"pattern": "f"}'),
        item(8, "tool", "orphan result", name="run_tests", call=None),
        item(9, "tool", "", name="deploy", call='{"env": "prod"}', has_result=False),
        item(10, "user", "[Attached context from session s2, head h]", attached_from="s2:h"),
        item(11, "assistant", "Done."),
    ]  # fmt: skip


def dumped(c: ContextCommit, shape: str) -> str:
    return json.dumps(render_shape(c, shape, MODEL))


def test_rendering_is_pure() -> None:
    items = sample()
    shuffled = items[:]
    random.Random(7).shuffle(shuffled)
    roundtrip = [Item.from_json(json.loads(json.dumps(i.to_json()))) for i in items]
    for shape in ("neutral", "openai", "anthropic"):
        first = dumped(commit(items), shape)
        assert dumped(commit(items), shape) == first
        assert dumped(commit(shuffled), shape) == first, "order comes from ord alone"
        assert dumped(commit(roundtrip), shape) == first, "a stored commit renders the same"


def test_summarized_items_are_skipped_and_summaries_are_context_the_user_gives() -> None:
    ctx = render_commit(commit(sample()))
    text = json.dumps(ctx.to_json())
    assert "Old reasoning." not in text and "old output" not in text
    assert ctx.system == "You are helpful."
    first = ctx.messages[0]  # the task and the summary share the first user turn
    assert first["role"] == "user"
    assert first["content"][1] == {"type": "text", "text": "[Summary] read two files"}
    assert "grep" in [t["name"] for t in ctx.tools], "the aged grep call is still listed"


def test_tool_items_pair_when_both_halves_survive() -> None:
    messages = render_commit(commit(sample())).messages
    uses = [b for m in messages if m["role"] == "assistant" for b in m["content"]
            if b["type"] == "tool_use"]  # fmt: skip
    results = [b for m in messages if m["role"] == "user" for b in m["content"]
               if b["type"] == "tool_result"]  # fmt: skip
    assert [(u["id"], u["name"], u["input"]) for u in uses] == [
        ("i6", "read_file", {"path": "a.py"}), ("i7", "grep", {"pattern": "f"})]  # fmt: skip
    assert [(r["tool_use_id"], r["content"], r["is_error"]) for r in results] == [
        ("i6", "def f(): ...", False),
        ("i7", "[tool result: 3 lines, first: x]", False),
    ]
    texts = [b["text"] for m in messages for b in m["content"] if b["type"] == "text"]
    assert "[tool run_tests result] orphan result" in texts
    assert '[tool deploy called with {"env": "prod"}; no result]' in texts


def test_non_json_arguments_are_wrapped() -> None:
    c = commit([item(0, "assistant", "go"), item(1, "tool", "ok", name="sh", call="ls -la")])
    [_, use] = render_commit(c).messages[0]["content"]
    assert use["input"] == {"arguments": "ls -la"}


# ---------------------------------------------------------- well-formedness


def check_anthropic(request: dict[str, Any]) -> None:
    messages = request["messages"]
    assert request.get("system", "x").strip(), "a system prompt is never blank"
    assert request.get("tools", [1]), "no empty tools array"
    for tool in request.get("tools", []):
        assert PROVIDER_NAME.fullmatch(tool["name"])
    seen: set[str] = set()
    for index, message in enumerate(messages):
        assert message["role"] in ("user", "assistant")
        if index:
            assert message["role"] != messages[index - 1]["role"], "roles alternate"
        assert message["content"], "no empty message"
        blocks = message["content"]
        results = [b for b in blocks if b["type"] == "tool_result"]
        if results:
            assert message["role"] == "user"
            assert blocks[: len(results)] == results, "tool results come first"
            previous = messages[index - 1]
            assert previous["role"] == "assistant"
            uses = [b["id"] for b in previous["content"] if b["type"] == "tool_use"]
            assert [r["tool_use_id"] for r in results] == uses, "each result follows its use"
        for block in blocks:
            if block["type"] == "text":
                assert block["text"].strip(), "Anthropic refuses blank text blocks"
            if block["type"] == "tool_use":
                assert PROVIDER_ID.fullmatch(block["id"]), block["id"]
                assert PROVIDER_NAME.fullmatch(block["name"]), block["name"]
                assert isinstance(block["input"], dict)
                assert message["role"] == "assistant"
                assert block["id"] not in seen, "tool ids are unique"
                seen.add(block["id"])
                assert index + 1 < len(messages), "a tool use is always answered"


def check_openai(request: dict[str, Any]) -> None:
    messages = request["messages"]
    open_calls: list[str] = []
    for index, message in enumerate(messages):
        assert message["role"] in ("system", "user", "assistant", "tool")
        if message["role"] == "system":
            assert index == 0
        if message["role"] == "tool":
            assert open_calls, "a tool message answers a call of the assistant just before"
            assert message["tool_call_id"] == open_calls.pop(0)
            assert isinstance(message["content"], str)
            continue
        assert not open_calls, f"unanswered tool calls {open_calls}"
        if message["role"] == "assistant":
            calls = message.get("tool_calls", [])
            assert message["content"] is not None or calls
            for call in calls:
                assert call["type"] == "function"
                assert PROVIDER_ID.fullmatch(call["id"]), call["id"]
                assert PROVIDER_NAME.fullmatch(call["function"]["name"])
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
            open_calls = [c["id"] for c in calls]
        else:
            assert isinstance(message["content"], str) and message["content"]
    assert not open_calls
    assert request.get("tools", [1]), "OpenAI refuses an empty tools array"
    names = [t["function"]["name"] for t in request.get("tools", [])]
    assert names == sorted(set(names))


def test_both_shapes_are_well_formed_for_the_sample() -> None:
    c = commit(sample())
    check_anthropic(render_shape(c, "anthropic", MODEL))
    check_openai(render_shape(c, "openai", MODEL))
    openai = render_shape(c, "openai", MODEL)
    assert openai["model"] == "claude-sonnet-4"
    assert [m["role"] for m in openai["messages"]][:3] == ["system", "user", "assistant"]


ROLES = st.sampled_from(["user", "assistant", "tool", "tool", "summary", "system", "marker"])
SPEC = st.tuples(
    ROLES,
    st.sampled_from(["full", "aged", "cleared", "summarized"]),
    st.booleans(),  # the call survived
    st.booleans(),  # the result survived
    st.booleans(),  # error
    st.sampled_from(["text", "", " \n"]),  # an assistant turn that only calls tools has none
    st.sampled_from(["t0", "t1", "mcp.fs/read file", "", None, "x" * 70]),  # any stored label
    st.sampled_from(["plain", "s1:attached", "toolu.01:x", "y" * 64]),  # any node id
)


Spec = tuple[str, str, bool, bool, bool, str, str | None, str]


def spec_items(specs: list[Spec], blocks: list[Any] | None = None) -> list[Any]:
    """The commit items ``SPEC`` draws; ``blocks[n]``, where given, are the n-th assistant's
    content blocks (the shapes' property test draws provider-native ones)."""
    items = []
    for n, (role, state, has_call, has_result, error, text, name, ident) in enumerate(specs):
        state = "summary" if role == "summary" else state
        item_id = f"{ident}{n}"[-64:]
        if role == "tool":
            items.append(item(n, role, f"out {n}", state, name=name, item_id=item_id,
                              call=json.dumps({"n": n}) if has_call else None,
                              has_result=has_result, is_error=error))  # fmt: skip
        else:
            body = f"{role} {n}" if text == "text" else text
            extra = {"blocks": blocks[n]} if role == "assistant" and blocks and blocks[n] else {}
            items.append(item(n, role, body, state, item_id=item_id, **extra))
    return items


@settings(max_examples=200, deadline=None)
@given(st.lists(SPEC, min_size=1, max_size=25))
def test_random_commits_render_well_formed(
    specs: list[tuple[str, str, bool, bool, bool, str, str | None, str]],
) -> None:
    c = commit(spec_items(specs))
    anthropic, openai = render_shape(c, "anthropic", MODEL), render_shape(c, "openai", MODEL)
    check_anthropic(anthropic)
    check_openai(openai)
    assert json.dumps(render_shape(c, "openai", MODEL)) == json.dumps(openai)


def test_parallel_calls_share_one_assistant_message_and_one_answer() -> None:
    c = commit([item(0, "user", "go"), item(1, "assistant", "Two reads."),
                item(2, "tool", "a", name="read_file", call='{"p": 1}'),
                item(3, "tool", "b", name="read_file", call='{"p": 2}'),
                item(4, "assistant", "Both read.")])  # fmt: skip
    messages = render_commit(c).messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in messages[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["i2", "i3"]
    openai = render_shape(c, "openai", MODEL)["messages"]
    assert [m["role"] for m in openai] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [call["id"] for call in openai[1]["tool_calls"]] == ["i2", "i3"]


def test_blank_text_is_left_out_and_a_tools_only_turn_has_no_text_block() -> None:
    c = commit(
        [
            item(0, "system", " "),
            item(1, "user", "go"),
            item(2, "assistant", ""),
            item(3, "tool", "hit", name="grep", call="{}"),
            item(4, "user", " \n"),
        ]
    )
    anthropic = render_shape(c, "anthropic", MODEL)
    assert "system" not in anthropic
    assert anthropic["messages"][1]["content"] == [
        {"type": "tool_use", "id": "i3", "name": "grep", "input": {}}]  # fmt: skip
    assert anthropic["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "i3", "content": "hit", "is_error": False}
    ]
    openai = render_shape(c, "openai", MODEL)
    assert openai["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "i3", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
        ],
    }


def test_empty_tool_lists_are_left_out_of_provider_shapes() -> None:
    c = commit([item(0, "user", "hi"), item(1, "assistant", "hello")])
    assert "tools" not in render_shape(c, "openai", MODEL)
    assert "tools" not in render_shape(c, "anthropic", MODEL)
    assert render_shape(c, "neutral", MODEL)["tools"] == []


def test_ids_and_names_providers_refuse_become_stable_legal_ones() -> None:
    odd = [item(0, "assistant", "go"),
           item(1, "tool", "a", name="mcp.fs/read file", call="{}", item_id="s1:n1"),
           item(2, "tool", "b", name="mcp.fs/read_file", call="{}", item_id="n" * 41)]  # fmt: skip
    first = render_shape(commit(odd), "anthropic", MODEL)
    uses = first["messages"][0]["content"][1:]
    assert [u["id"] for u in uses] == [tool_call_id("s1:n1"), tool_call_id("n" * 41)]
    assert all(PROVIDER_ID.fullmatch(u["id"]) for u in uses)
    assert uses[0]["id"] != uses[1]["id"]
    names = [u["name"] for u in uses]
    assert names[0].startswith("mcp_fs_read_file_") and names[1].startswith("mcp_fs_read_file_")
    assert names[0] != names[1], "names that clean up alike stay apart"
    assert render_shape(commit(odd), "anthropic", MODEL) == first, "the same on every render"
    assert tool_call_id("toolu_01ABC") == "toolu_01ABC" and tool_name("grep") == "grep"


def test_a_tool_whose_uses_were_all_summarized_stays_listed_unless_dropped() -> None:
    c = commit(sample())
    listed = [t["name"] for t in render_commit(c).tools]
    assert "grep" in listed and "read_file" in listed
    only_summarized = [item(0, "user", "go"), item(3, "tool", "out", state="summarized",
                                                    name="legacy_tool", call="{}")]  # fmt: skip
    assert [t["name"] for t in render_commit(commit(only_summarized)).tools] == ["legacy_tool"]
    assert render_commit(commit(only_summarized), drop_summarized_tools=True).tools == []


def test_cache_breakpoints_mark_tools_system_and_the_last_message() -> None:
    c = commit(sample())
    plain = render_shape(c, "anthropic", MODEL)
    cached = render_shape(c, "anthropic", MODEL, cache=True)
    mark = {"type": "ephemeral"}
    assert cached["tools"][-1]["cache_control"] == mark
    assert all("cache_control" not in t for t in cached["tools"][:-1])
    assert cached["system"] == [{"type": "text", "text": plain["system"], "cache_control": mark}]
    assert cached["messages"][-1]["content"][-1]["cache_control"] == mark
    assert sum(json.dumps(cached).count('"cache_control"') for _ in [0]) == 3
    assert "cache_control" not in json.dumps(plain), "off unless asked for"
    stripped = json.loads(
        json.dumps(cached).replace(', "cache_control": {"type": "ephemeral"}', "")
    )
    stripped["system"] = stripped["system"][0]["text"]
    assert stripped == plain, "the same request, only marked"
