"""The OpenAI Chat Completions shape of a rendered request.

The neutral shape carries Anthropic-style content blocks; here they become
Chat Completions messages: tool calls on the assistant message, each
result a ``tool`` message, images and documents as content parts.  What
Chat Completions has no place for is said, not dropped silently: thinking
is the other provider's and is left out (OpenAI keeps its own reasoning),
and images a tool returned, which a ``tool`` message cannot carry, follow
the results in a user message.
"""

from __future__ import annotations

from typing import Any

from domain.call_input import arguments_json
from domain.content_blocks import text_view
from domain.render import Block, Context, Message
from domain.tool_specs import OPEN_SCHEMA, Spec


def _url(source: dict[str, Any]) -> str:
    if source["type"] == "base64":
        return f"data:{source['media_type']};base64,{source['data']}"
    return str(source.get("url", ""))


def _part(block: Block) -> dict[str, Any]:
    """A user-content block as a Chat Completions content part."""
    if block["type"] == "image":
        image: dict[str, Any] = {"url": _url(block["source"])}
        if block.get("detail") in ("low", "high", "auto"):
            image["detail"] = block["detail"]
        return {"type": "image_url", "image_url": image}
    if block["type"] == "document":
        source = block["source"]
        if source["type"] == "base64":
            filename = block.get("title") or "document.pdf"
            return {"type": "file", "file": {"filename": filename, "file_data": _url(source)}}
        if source["type"] == "text":
            return {"type": "text", "text": source["data"]}
        return {"type": "text", "text": f"[document: {source.get('url', '')}]"}
    return {"type": "text", "text": block["text"]}


def _user(blocks: list[Block]) -> dict[str, Any]:
    if all(b["type"] == "text" for b in blocks):
        return {"role": "user", "content": "\n\n".join(b["text"] for b in blocks)}
    return {"role": "user", "content": [_part(b) for b in blocks]}


def _result_text(content: Any) -> str:
    return content if isinstance(content, str) else text_view(content)


def _message(message: Message) -> list[dict[str, Any]]:
    blocks = message["content"]
    if message["role"] == "assistant":
        texts = [b["text"] for b in blocks if b["type"] == "text"]
        calls = [
            {"id": b["id"], "type": "function",
             "function": {"name": b["name"], "arguments": arguments_json(b["input"])}}
            for b in blocks if b["type"] == "tool_use"
        ]  # fmt: skip
        out: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
        if calls:
            out["tool_calls"] = calls
        return [out] if texts or calls else []
    results = [b for b in blocks if b["type"] == "tool_result"]
    said = [b for b in blocks if b["type"] != "tool_result"]
    out_messages = [{"role": "tool", "tool_call_id": b["tool_use_id"],
                     "content": _result_text(b["content"])} for b in results]  # fmt: skip
    images = [b for r in results if not isinstance(r["content"], str)
              for b in r["content"] if b["type"] == "image"]  # fmt: skip
    if images:
        out_messages.append(_user([{"type": "text", "text": "[images the tools returned]"},
                                   *images]))  # fmt: skip
    if said:
        out_messages.append(_user(said))
    return out_messages


def openai_tool(spec: Spec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": spec["name"]}
    if spec.get("description"):
        function["description"] = spec["description"]
    function["parameters"] = spec.get("input_schema", OPEN_SCHEMA)
    return {"type": "function", "function": function}


def to_openai(ctx: Context, model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if ctx.system:
        messages.append({"role": "system", "content": ctx.system})
    for message in ctx.messages:
        messages.extend(_message(message))
    request: dict[str, Any] = {"model": model.split(":", 1)[-1], "messages": messages}
    if ctx.tools:  # OpenAI refuses an empty tools array
        request["tools"] = [openai_tool(spec) for spec in ctx.tools]
    return request
