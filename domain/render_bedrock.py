"""The Amazon Bedrock Converse shape of a rendered request.

``messages`` alternate ``user`` and ``assistant`` turns of content blocks,
each block one of ``text``, ``image``, ``document``, ``toolUse`` or
``toolResult``; the system prompt is ``system`` and the tools
``toolConfig.tools[].toolSpec``.  Bytes (images, PDFs) are the stored base64,
as Converse's JSON carries them (boto3 takes the decoded bytes).  With
``cache`` a ``cachePoint`` follows the tools, the system prompt and the last
message, where Anthropic's breakpoints go.  Other providers' native items are
left out (``domain.native_blocks``).
"""

from __future__ import annotations

import re
from typing import Any

from domain.content_blocks import text_view
from domain.render import Block, Context, Message
from domain.tool_specs import OPEN_SCHEMA, Spec

CACHE_POINT = {"cachePoint": {"type": "default"}}
IMAGE_FORMATS = {"image/jpeg": "jpeg", "image/png": "png", "image/gif": "gif",
                 "image/webp": "webp"}  # fmt: skip
DOCUMENT_FORMATS = {"application/pdf": "pdf", "text/plain": "txt", "text/csv": "csv",
                    "text/html": "html", "text/markdown": "md"}  # fmt: skip


def _document_name(title: str | None, index: int) -> str:
    """Converse allows letters, digits, single spaces, hyphens, parentheses, brackets."""
    name = re.sub(r"[^A-Za-z0-9\-()\[\] ]+", " ", title or "").strip()
    name = re.sub(r" +", " ", name)[:200]
    return name or f"document {index}"


def _media(block: Block, index: int) -> dict[str, Any]:
    source = block["source"]
    if block["type"] == "image":
        fmt = IMAGE_FORMATS.get(str(source.get("media_type")))
        if source["type"] == "base64" and fmt:
            return {"image": {"format": fmt, "source": {"bytes": source["data"]}}}
        return {"text": f"[image: {source.get('url', source.get('media_type', ''))}]"}
    if source["type"] == "text":
        return {"text": source["data"]}
    fmt = DOCUMENT_FORMATS.get(str(source.get("media_type")))
    if source["type"] == "base64" and fmt:
        return {"document": {"format": fmt, "name": _document_name(block.get("title"), index),
                             "source": {"bytes": source["data"]}}}  # fmt: skip
    return {"text": f"[document: {block.get('title') or source.get('url', '')}]"}


def _result(block: Block, index: int) -> dict[str, Any]:
    content = block["content"]
    if isinstance(content, str):
        parts: list[dict[str, Any]] = [{"text": content or "(empty)"}]
    else:
        text = text_view([b for b in content if b["type"] != "image"])
        parts = [{"text": text}] if text.strip() else []
        parts.extend(_media(b, index) for b in content if b["type"] == "image")
        parts = parts or [{"text": "(empty)"}]
    return {"toolResult": {"toolUseId": block["tool_use_id"], "content": parts,
                           "status": "error" if block.get("is_error") else "success"}}  # fmt: skip


def _block(block: Block, index: int) -> dict[str, Any] | None:
    kind = block["type"]
    if kind == "text":
        return {"text": block["text"]}
    if kind in ("image", "document"):
        return _media(block, index)
    if kind == "tool_use":
        return {"toolUse": {"toolUseId": block["id"], "name": block["name"],
                            "input": block["input"]}}  # fmt: skip
    if kind == "tool_result":
        return _result(block, index)
    return None  # other providers' native items: left out


def _message(message: Message, index: int) -> dict[str, Any] | None:
    content = [b for block in message["content"] if (b := _block(block, index)) is not None]
    return {"role": message["role"], "content": content} if content else None


def bedrock_tool(spec: Spec) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": spec["name"]}
    if spec.get("description"):
        tool["description"] = spec["description"]
    tool["inputSchema"] = {"json": spec.get("input_schema", OPEN_SCHEMA)}
    return {"toolSpec": tool}


def to_bedrock(ctx: Context, model: str, cache: bool = False) -> dict[str, Any]:
    """Empty ``system`` and ``toolConfig`` are left out rather than sent empty."""
    request: dict[str, Any] = {"modelId": model.split(":", 1)[-1]}
    messages: list[dict[str, Any]] = []
    for index, message in enumerate(ctx.messages):
        converted = _message(message, index)
        if converted is None:
            continue
        if messages and messages[-1]["role"] == converted["role"]:  # turns alternate
            converted = {
                "role": converted["role"],
                "content": [*messages.pop()["content"], *converted["content"]],
            }
        messages.append(converted)
    if cache and messages:
        last = messages[-1]
        messages[-1] = {"role": last["role"], "content": [*last["content"], CACHE_POINT]}
    request["messages"] = messages
    if ctx.system:
        request["system"] = [{"text": ctx.system}, *([CACHE_POINT] if cache else [])]
    if ctx.tools:
        tools: list[dict[str, Any]] = [bedrock_tool(spec) for spec in ctx.tools]
        request["toolConfig"] = {"tools": [*tools, *([CACHE_POINT] if cache else [])]}
    return request
