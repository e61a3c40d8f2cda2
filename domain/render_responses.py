"""The OpenAI Responses API shape of a rendered request (``input`` items).

What the Agents SDK, Codex and many gateways send: the system prompt as
``instructions``, the conversation as typed items.  A user turn is a
``message`` of ``input_text`` / ``input_image`` / ``input_file`` parts; an
assistant turn a ``message`` of ``output_text`` (its id a stable digest of
the text's place, so the same commit renders the same bytes), each tool
call a ``function_call`` item answered by a ``function_call_output`` with the
same ``call_id``.  OpenAI's own ``reasoning`` and ``compaction`` items pass
back exactly as stored, before the turn's text, as the API gave them.
"""

from __future__ import annotations

import json
from typing import Any

from domain.call_ids import digest
from domain.render import Block, Context, Message
from domain.tool_specs import OPEN_SCHEMA, Spec


def _url(source: dict[str, Any]) -> str:
    if source["type"] == "base64":
        return f"data:{source['media_type']};base64,{source['data']}"
    return str(source.get("url", ""))


def input_part(block: Block) -> dict[str, Any]:
    """A user-content block as a Responses input content part."""
    if block["type"] == "image":
        detail = block.get("detail") if block.get("detail") in ("low", "high") else "auto"
        return {"type": "input_image", "image_url": _url(block["source"]), "detail": detail}
    if block["type"] == "document":
        source = block["source"]
        if source["type"] == "base64":
            return {"type": "input_file", "filename": block.get("title") or "document.pdf",
                    "file_data": _url(source)}  # fmt: skip
        if source["type"] == "url":
            return {"type": "input_file", "file_url": source["url"]}
        return {"type": "input_text", "text": source["data"]}
    return {"type": "input_text", "text": block["text"]}


def _result_output(content: Any) -> Any:
    """A tool result: its text, or its parts when it holds an image."""
    if isinstance(content, str):
        return content
    if all(b["type"] == "text" for b in content):
        return "\n".join(b["text"] for b in content)
    return [input_part(b) for b in content]


def _assistant(message: Message, at: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[str] = []

    def said() -> None:
        if texts:
            text = "\n\n".join(texts)
            items.append({"id": "msg_" + digest(f"{at}:{len(items)}:{text}")[:40],
                          "type": "message", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": text,
                                       "annotations": []}]})  # fmt: skip
            texts.clear()

    for block in message["content"]:
        kind = block["type"]
        if kind in ("reasoning", "compaction"):
            items.append(block)  # OpenAI's own, byte for byte
        elif kind == "text":
            texts.append(block["text"])
        elif kind == "tool_use":
            said()
            items.append({"type": "function_call", "call_id": block["id"],
                          "name": block["name"],
                          "arguments": json.dumps(block["input"], sort_keys=True)})  # fmt: skip
    said()
    return items


def _user(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message["content"]:
        if block["type"] == "tool_result":
            items.append({"type": "function_call_output", "call_id": block["tool_use_id"],
                          "output": _result_output(block["content"])})  # fmt: skip
        else:
            parts.append(input_part(block))
    if parts:
        items.append({"type": "message", "role": "user", "content": parts})
    return items


def responses_tool(spec: Spec) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": "function", "name": spec["name"]}
    if spec.get("description"):
        tool["description"] = spec["description"]
    tool["parameters"] = spec.get("input_schema", OPEN_SCHEMA)
    tool["strict"] = False  # a declared schema is taken as given, not made strict
    return tool


def to_responses(ctx: Context, model: str) -> dict[str, Any]:
    """Empty ``instructions`` and ``tools`` are left out rather than sent empty."""
    request: dict[str, Any] = {"model": model.split(":", 1)[-1]}
    if ctx.system:
        request["instructions"] = ctx.system
    items: list[dict[str, Any]] = []
    for at, message in enumerate(ctx.messages):
        items.extend(_assistant(message, at) if message["role"] == "assistant"
                     else _user(message))  # fmt: skip
    request["input"] = items
    if ctx.tools:
        request["tools"] = [responses_tool(spec) for spec in ctx.tools]
    return request
