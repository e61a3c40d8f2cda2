"""Rendering a commit: pure, and well-formed for both provider shapes."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.context import ContextCommit, Item
from domain.render import render_commit, render_shape

MODEL = "anthropic:claude-sonnet-4"


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


def test_summarized_items_are_skipped_and_summaries_are_assistant_text() -> None:
    ctx = render_commit(commit(sample()))
    text = json.dumps(ctx.to_json())
    assert "Old reasoning." not in text and "old output" not in text
    assert ctx.system == "You are helpful."
    first_assistant = ctx.messages[1]
    assert first_assistant["role"] == "assistant"
    assert first_assistant["content"][0] == {"type": "text", "text": "[Summary] read two files"}
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
            if block["type"] == "tool_use":
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
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
            open_calls = [c["id"] for c in calls]
        else:
            assert isinstance(message["content"], str) and message["content"]
    assert not open_calls
    names = [t["function"]["name"] for t in request["tools"]]
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
)


@settings(max_examples=150, deadline=None)
@given(st.lists(SPEC, min_size=1, max_size=25))
def test_random_commits_render_well_formed(specs: list[tuple[str, str, bool, bool, bool]]) -> None:
    items = []
    for n, (role, state, has_call, has_result, error) in enumerate(specs):
        state = "summary" if role == "summary" else state
        if role == "tool":
            items.append(item(n, role, f"out {n}", state, name=f"t{n % 3}",
                              call=json.dumps({"n": n}) if has_call else None,
                              has_result=has_result, is_error=error))  # fmt: skip
        else:
            items.append(item(n, role, f"{role} {n}", state))
    c = commit(items)
    anthropic, openai = render_shape(c, "anthropic", MODEL), render_shape(c, "openai", MODEL)
    check_anthropic(anthropic)
    check_openai(openai)
    assert json.dumps(render_shape(c, "openai", MODEL)) == json.dumps(openai)
