"""Rendering a commit into the provider request: a pure function.

Same commit in, byte-identical request out: no clock, no randomness, tool
lists sorted.  Stable content (tool definitions, the system prompt, the
oldest messages) comes first so providers' prompt caches keep hitting as
the conversation grows.  The neutral shape is Anthropic's content-block
form; ``domain.render_openai`` turns it into Chat Completions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domain.call_ids import distinct_call_id, tool_name
from domain.call_input import tool_input
from domain.context import ContextCommit, Item
from domain.native_blocks import carried
from domain.provider_compaction import folded_ids
from domain.tool_specs import OPEN_SCHEMA, Spec, listed_tools, uses

Block = dict[str, Any]
Message = dict[str, Any]
# The content blocks each role's message may carry (thinking: the assistant's own,
# passed back intact, signature and all).
ALLOWED = {
    "user": ("text", "image", "document"),
    "assistant": ("thinking", "redacted_thinking", "compaction", "reasoning", "text"),
    "tool": ("text", "image"),
}
# What goes before anything else an assistant message holds: a provider's own
# items (``domain.native_blocks``), in the order the provider gave them.
THINKING = ("thinking", "redacted_thinking", "compaction", "reasoning")


@dataclass(frozen=True)
class Context:
    system: str
    messages: list[Message] = field(default_factory=list)
    tools: list[Spec] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "messages": self.messages, "tools": self.tools}


def _push(messages: list[Message], role: str, block: Block) -> None:
    """Append a block, merging into the previous message of the same role.

    Thinking goes before anything else an assistant message holds, as
    Anthropic requires of a turn that thought.
    """
    if not (messages and messages[-1]["role"] == role):
        messages.append({"role": role, "content": [block]})
        return
    content = messages[-1]["content"]
    if block["type"] in THINKING:
        at = 0
        while at < len(content) and content[at]["type"] in THINKING:
            at += 1
        content.insert(at, block)
    else:
        content.append(block)


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _blank(text: str) -> bool:
    """``not text.strip()`` without copying a 20 kB result to find out."""
    return not text or text.isspace()


def _shown(
    blocks: list[Block] | None, kinds: tuple[str, ...], shape: str = "neutral"
) -> list[Block]:
    """The blocks a message of this kind may carry in ``shape``; blank text left out."""
    return [b for b in blocks or () if b["type"] in kinds and carried(b, shape)
            and not (b["type"] == "text" and _blank(b["text"]))]  # fmt: skip


class _Conversation:
    """Messages as providers take them.

    Tool calls in a row share one assistant message and their results one
    user message, as parallel calls are made and answered.  Blank text is
    left out: it tells the model nothing, and Anthropic refuses a blank text
    block (an assistant turn that only calls tools has no text).
    """

    def __init__(self, shape: str = "neutral") -> None:
        self.shape = shape  # whose provider-native blocks are carried
        self.messages: list[Message] = []
        self.results: list[Block] = []  # answers to the calls just made
        self.call_ids: set[str] = set()

    def say(self, role: str, text: str, blocks: list[Block] | None = None) -> None:
        shown = _shown(blocks, ALLOWED[role], self.shape) if blocks else []
        if not shown and not _blank(text):
            shown = [_text(text)]
        if shown:
            self.flush()
            for block in shown:
                _push(self.messages, role, block)

    def tool(self, item: Item) -> None:
        name = item.name or "tool"
        if item.has_result and item.call is not None:
            call_id = distinct_call_id(item, self.call_ids)
            call: Block = {"type": "tool_use", "id": call_id, "name": tool_name(item.name),
                           "input": tool_input(item.call)}  # fmt: skip
            if item.call_signature and self.shape == "gemini":  # no other provider takes it
                call["thoughtSignature"] = item.call_signature
            _push(self.messages, "assistant", call)
            content: Any = _shown(item.blocks, ALLOWED["tool"]) or item.rendered
            self.results.append({"type": "tool_result", "tool_use_id": call_id,
                                 "content": content, "is_error": item.is_error})  # fmt: skip
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


def request_tools(commit: ContextCommit, drop_summarized_tools: bool = False,
                  recall_tool: bool = False) -> list[Spec]:  # fmt: skip
    """The tools the request lists (``domain.tool_specs``), as providers take their names."""
    specs = listed_tools(uses(commit.items), commit.tools, drop_summarized_tools, recall_tool)
    return [dict(spec, name=tool_name(spec["name"])) for spec in specs]


def render_commit(commit: ContextCommit, drop_summarized_tools: bool = False,
                  shape: str = "neutral", recall_tool: bool = False) -> Context:  # fmt: skip
    """The neutral request; ``shape`` leaves out the native blocks it cannot carry."""
    system_parts: list[str] = []
    conversation = _Conversation(shape)
    folded = folded_ids(commit, shape)  # what this provider's compaction stands for
    for item in sorted(commit.items, key=lambda i: i.ord):
        if item.state == "summarized" or item.item_id in folded:
            continue
        if item.role == "system":
            if not _blank(item.rendered):
                system_parts.append(item.rendered)
        elif item.role == "tool":
            conversation.tool(item)
        elif item.role == "assistant":
            conversation.say("assistant", item.rendered, item.blocks)
        else:  # user messages, summaries and attach markers
            # A summary is context given to the model, not its own words: said
            # as the assistant's, one that folded the last turn would end the
            # request on an assistant turn, which Anthropic takes as a prefill.
            conversation.say("user", item.rendered, item.blocks)
    conversation.flush()
    tools = request_tools(commit, drop_summarized_tools, recall_tool)
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
        tools = [anthropic_tool(spec) for spec in ctx.tools]
        if cache:
            tools[-1]["cache_control"] = CACHE_CONTROL
        request["tools"] = tools
    return request


def anthropic_tool(spec: Spec) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": spec["name"]}
    if spec.get("description"):
        tool["description"] = spec["description"]
    tool["input_schema"] = spec.get("input_schema", OPEN_SCHEMA)
    return tool


SHAPES = ("neutral", "openai", "anthropic", "responses", "gemini", "bedrock")


def load_shapes() -> None:
    """Import every shape's renderer now (a server's start), not in the first render of
    each: ``render_shape`` imports them late only because they import this module."""
    from domain import render_bedrock, render_gemini, render_openai, render_responses

    del render_bedrock, render_gemini, render_openai, render_responses


def render_shape(commit: ContextCommit, shape: str, model: str, cache: bool = False,
                 drop_summarized_tools: bool = False,
                 recall_tool: bool = False) -> dict[str, Any]:  # fmt: skip
    from domain.render_bedrock import to_bedrock
    from domain.render_gemini import to_gemini
    from domain.render_openai import to_openai
    from domain.render_responses import to_responses

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}: use one of {', '.join(SHAPES)}")
    ctx = render_commit(commit, drop_summarized_tools, shape, recall_tool)
    if shape == "openai":
        return to_openai(ctx, model)
    if shape == "anthropic":
        return to_anthropic(ctx, model, cache)
    if shape == "responses":
        return to_responses(ctx, model)
    if shape == "gemini":
        return to_gemini(ctx)
    if shape == "bedrock":
        return to_bedrock(ctx, model, cache)
    return ctx.to_json()
