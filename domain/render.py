"""Rendering a commit into the provider request: a pure function.

Same commit in, byte-identical request out: no clock, no randomness, tool
lists sorted.  Stable content (system prompt, tool definitions, the oldest
messages) comes first so providers' prompt caches keep hitting as the
conversation grows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from domain.context import ContextCommit, Item

Block = dict[str, Any]
Message = dict[str, Any]


@dataclass(frozen=True)
class Context:
    system: str
    messages: list[Message] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "messages": self.messages, "tools": self.tools}


def _tool_input(call: str | None) -> dict[str, Any]:
    if not call:
        return {}
    try:
        parsed = json.loads(call)
    except ValueError:
        return {"arguments": call}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def _push(messages: list[Message], role: str, block: Block) -> None:
    """Append a block, merging into the previous message of the same role."""
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].append(block)
    else:
        messages.append({"role": role, "content": [block]})


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _render_tool(messages: list[Message], item: Item) -> None:
    call_id = item.item_id
    if item.has_result and item.call is not None:
        _push(messages, "assistant", {"type": "tool_use", "id": call_id,
                                      "name": item.name or "tool",
                                      "input": _tool_input(item.call)})  # fmt: skip
        _push(messages, "user", {"type": "tool_result", "tool_use_id": call_id,
                                 "content": item.rendered, "is_error": item.is_error})  # fmt: skip
        return
    # Only one half survived: say what happened in plain text instead.
    if item.has_result:
        _push(messages, "user", _text(f"[tool {item.name} result] {item.rendered}"))
    else:
        _push(messages, "user", _text(f"[tool {item.name} called with {item.call}; no result]"))


def render_commit(commit: ContextCommit) -> Context:
    system_parts: list[str] = []
    messages: list[Message] = []
    tool_names: set[str] = set()
    for item in sorted(commit.items, key=lambda i: i.ord):
        if item.state == "summarized":
            continue
        if item.role == "system":
            system_parts.append(item.rendered)
        elif item.role == "tool":
            tool_names.add(item.name or "tool")
            _render_tool(messages, item)
        elif item.role == "assistant" or item.role == "summary":
            _push(messages, "assistant", _text(item.rendered))
        else:  # user messages and attach markers
            _push(messages, "user", _text(item.rendered))
    tools = [{"name": name} for name in sorted(tool_names)]
    return Context("\n\n".join(system_parts), messages, tools)


def to_anthropic(ctx: Context, model: str) -> dict[str, Any]:
    return {
        "model": model.split(":", 1)[-1],
        "system": ctx.system,
        "messages": ctx.messages,
        "tools": [{"name": t["name"], "input_schema": {"type": "object"}} for t in ctx.tools],
    }


def _openai_message(message: Message) -> list[dict[str, Any]]:
    texts = [b["text"] for b in message["content"] if b["type"] == "text"]
    if message["role"] == "assistant":
        calls = [
            {"id": b["id"], "type": "function",
             "function": {"name": b["name"], "arguments": json.dumps(b["input"], sort_keys=True)}}
            for b in message["content"] if b["type"] == "tool_use"
        ]  # fmt: skip
        out: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
        if calls:
            out["tool_calls"] = calls
        return [out]
    results = [
        {"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]}
        for b in message["content"] if b["type"] == "tool_result"
    ]  # fmt: skip
    return results + ([{"role": "user", "content": "\n\n".join(texts)}] if texts else [])


def to_openai(ctx: Context, model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if ctx.system:
        messages.append({"role": "system", "content": ctx.system})
    for message in ctx.messages:
        messages.extend(_openai_message(message))
    tools = [{"type": "function", "function": {"name": t["name"],
              "parameters": {"type": "object"}}} for t in ctx.tools]  # fmt: skip
    return {"model": model.split(":", 1)[-1], "messages": messages, "tools": tools}


SHAPES = ("neutral", "openai", "anthropic")


def render_shape(commit: ContextCommit, shape: str, model: str) -> dict[str, Any]:
    ctx = render_commit(commit)
    if shape == "neutral":
        return ctx.to_json()
    if shape == "openai":
        return to_openai(ctx, model)
    if shape == "anthropic":
        return to_anthropic(ctx, model)
    raise ValueError(f"unknown shape {shape!r}: use one of {', '.join(SHAPES)}")
