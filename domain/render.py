"""Rendering a commit into the provider request: a pure function.

Same commit in, byte-identical request out: no clock, no randomness, tool
lists sorted.  Stable content (system prompt, tool definitions, the oldest
messages) comes first so providers' prompt caches keep hitting as the
conversation grows.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from domain.context import ContextCommit, Item
from domain.tokens import count_tokens

Block = dict[str, Any]
Message = dict[str, Any]
_PROVIDER_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")
_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


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


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def tool_call_id(item_id: str) -> str:
    """The id a tool use goes by: the item's own id when providers accept it.

    Anthropic takes ``[A-Za-z0-9_-]`` only and OpenAI at most 40 characters,
    while a node id may be any 64 characters and an attached item's id is
    ``session:node``.  Others get a digest of the id, so the same item keeps
    the same id in every render.
    """
    if _PROVIDER_ID.fullmatch(item_id):
        return item_id
    return "call_" + _digest(item_id)[:32]


# What a tool call costs beyond its arguments and result: the tool_use and
# tool_result blocks' own structure, and the call id, which both name.
TOOL_FRAMING = 12


def call_framing(item: Item) -> int:
    """Tokens a tool item's call and result blocks add around its text, as rendered.

    A commit's items are counted one by one; without this a session of many
    short tool calls with long ids (a UUID costs ~20 tokens, and is sent
    twice) rendered twice what its budget counted.
    """
    if item.role != "tool" or not item.has_result or item.call is None:
        return 0
    return 2 * count_tokens(tool_call_id(item.item_id)) + TOOL_FRAMING


def tool_name(name: str | None) -> str:
    """A tool name providers accept (``[A-Za-z0-9_-]{1,64}``), readable and distinct.

    A name that needed changing keeps its legal characters and gets a short
    digest of the original, so two names that clean up alike stay apart.
    """
    if not name:
        return "tool"
    if _PROVIDER_NAME.fullmatch(name):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:56]
    return f"{cleaned or 'tool'}_{_digest(name)[:7]}"


def _push(messages: list[Message], role: str, block: Block) -> None:
    """Append a block, merging into the previous message of the same role."""
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].append(block)
    else:
        messages.append({"role": role, "content": [block]})


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


class _Conversation:
    """Messages as providers take them.

    Tool calls in a row share one assistant message and their results one
    user message, as parallel calls are made and answered.  Blank text is
    left out: it tells the model nothing, and Anthropic refuses a blank text
    block (an assistant turn that only calls tools has no text).
    """

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.results: list[Block] = []  # answers to the calls just made

    def say(self, role: str, text: str) -> None:
        if text.strip():
            self.flush()
            _push(self.messages, role, _text(text))

    def tool(self, item: Item) -> None:
        name = item.name or "tool"
        if item.has_result and item.call is not None:
            call_id = tool_call_id(item.item_id)
            _push(self.messages, "assistant", {"type": "tool_use", "id": call_id,
                                               "name": tool_name(item.name),
                                               "input": _tool_input(item.call)})  # fmt: skip
            self.results.append({"type": "tool_result", "tool_use_id": call_id,
                                 "content": item.rendered, "is_error": item.is_error})  # fmt: skip
        # Only one half survived: say what happened in plain text instead.
        elif item.has_result:
            self.say("user", f"[tool {name} result] {item.rendered}")
        elif item.call:
            self.say("user", f"[tool {name} called with {item.call}; no result]")
        else:
            self.say("user", f"[tool {name} called; no result]")

    def flush(self) -> None:
        for block in self.results:
            _push(self.messages, "user", block)
        self.results = []


def listed_tools(items: Iterable[Item], drop_summarized: bool = False) -> list[str]:
    """The tools a request lists, by their own names: one per tool the history used.

    A tool whose every use is folded into a summary stays listed unless the
    policy drops it (``Policy.drop_summarized_tools``): the tool list is the
    most stable part of a request, and the agent may call the tool again.
    The budget counts exactly these (``domain.pipeline``).
    """
    return sorted(
        {
            i.name or "tool"
            for i in items
            if i.role == "tool" and not (drop_summarized and i.state == "summarized")
        }
    )


def render_commit(commit: ContextCommit, drop_summarized_tools: bool = False) -> Context:
    system_parts: list[str] = []
    conversation = _Conversation()
    for item in sorted(commit.items, key=lambda i: i.ord):
        if item.state == "summarized":
            continue
        if item.role == "system":
            if item.rendered.strip():
                system_parts.append(item.rendered)
        elif item.role == "tool":
            conversation.tool(item)
        elif item.role == "assistant" or item.role == "summary":
            conversation.say("assistant", item.rendered)
        else:  # user messages and attach markers
            conversation.say("user", item.rendered)
    conversation.flush()
    names = sorted({tool_name(n) for n in listed_tools(commit.items, drop_summarized_tools)})
    tools = [{"name": name} for name in names]
    return Context("\n\n".join(system_parts), conversation.messages, tools)


CACHE_CONTROL = {"type": "ephemeral"}


def to_anthropic(ctx: Context, model: str, cache: bool = False) -> dict[str, Any]:
    """Empty ``system`` and ``tools`` are left out rather than sent empty.

    ``cache`` adds prompt-cache breakpoints where the prefix stays put: after
    the tool definitions, after the system prompt, and at the end of the
    last message (the next request, if it only appends, reads all of it from
    the cache).  Three of Anthropic's four allowed breakpoints.
    """
    request: dict[str, Any] = {"model": model.split(":", 1)[-1]}
    if ctx.system:
        system: Any = ctx.system
        if cache:
            system = [{"type": "text", "text": ctx.system, "cache_control": CACHE_CONTROL}]
        request["system"] = system
    messages = ctx.messages
    if cache and messages:
        messages = [*messages[:-1], dict(messages[-1])]
        blocks = [dict(b) for b in messages[-1]["content"]]
        blocks[-1]["cache_control"] = CACHE_CONTROL
        messages[-1]["content"] = blocks
    request["messages"] = messages
    if ctx.tools:
        tools = [{"name": t["name"], "input_schema": {"type": "object"}} for t in ctx.tools]
        if cache:
            tools[-1]["cache_control"] = CACHE_CONTROL
        request["tools"] = tools
    return request


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
    request: dict[str, Any] = {"model": model.split(":", 1)[-1], "messages": messages}
    if ctx.tools:  # OpenAI refuses an empty tools array
        request["tools"] = [{"type": "function", "function": {"name": t["name"],
                             "parameters": {"type": "object"}}} for t in ctx.tools]  # fmt: skip
    return request


SHAPES = ("neutral", "openai", "anthropic")


def render_shape(commit: ContextCommit, shape: str, model: str, cache: bool = False,
                 drop_summarized_tools: bool = False) -> dict[str, Any]:  # fmt: skip
    ctx = render_commit(commit, drop_summarized_tools)
    if shape == "neutral":
        return ctx.to_json()
    if shape == "openai":
        return to_openai(ctx, model)
    if shape == "anthropic":
        return to_anthropic(ctx, model, cache)
    raise ValueError(f"unknown shape {shape!r}: use one of {', '.join(SHAPES)}")
