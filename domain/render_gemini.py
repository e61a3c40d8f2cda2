"""The Gemini ``generateContent`` shape of a rendered request.

``contents`` alternate ``user`` and ``model`` turns of parts: ``text``,
``inlineData`` (images and PDFs, base64 as stored), ``functionCall`` on the
model's turn and ``functionResponse`` on the next user turn, matched by name
and order as Gemini pairs them.  The system prompt is ``systemInstruction``
and the tools one ``functionDeclarations`` list.  Field names are the REST
API's JSON (lowerCamelCase), which the ``google-genai`` types also take.  A
text block stored with Gemini's ``thoughtSignature`` keeps it, and so does a
``functionCall`` whose tool node has one in its metadata; other
providers' native items cannot be read by Gemini and are left out
(``domain.native_blocks``).
"""

from __future__ import annotations

from typing import Any

from domain.content_blocks import text_view
from domain.render import Block, Context, Message
from domain.tool_specs import OPEN_SCHEMA, Spec

Part = dict[str, Any]


def _media(block: Block) -> Part:
    """An image or document as inline data, or a line saying where it is."""
    source = block["source"]
    if source["type"] == "base64":
        return {"inlineData": {"mimeType": source["media_type"], "data": source["data"]}}
    if source["type"] == "text":
        return {"text": source["data"]}
    return {"text": f"[{block['type']}: {source.get('url', '')}]"}


def _part(block: Block) -> Part | None:
    kind = block["type"]
    if kind == "text":
        part: Part = {"text": block["text"]}
        signature = block.get("thoughtSignature") or block.get("thought_signature")
        if isinstance(signature, str):
            part["thoughtSignature"] = signature
        return part
    if kind in ("image", "document"):
        return _media(block)
    if kind == "tool_use":
        call: Part = {"functionCall": {"name": block["name"], "args": block["input"]}}
        if "thoughtSignature" in block:  # the tool node's, as Gemini gave it with the call
            call["thoughtSignature"] = block["thoughtSignature"]
        return call
    return None  # native items of other providers: left out


def _response(block: Block, names: dict[str, str]) -> list[Part]:
    """A tool result as a ``functionResponse``, its images as parts after it."""
    content = block["content"]
    text = content if isinstance(content, str) else text_view(content)
    key = "error" if block.get("is_error") else "output"
    name = names.get(block["tool_use_id"], "tool")
    parts: list[Part] = [{"functionResponse": {"name": name, "response": {key: text}}}]
    if not isinstance(content, str):
        parts.extend(_media(b) for b in content if b["type"] == "image")
    return parts


def _content(message: Message, names: dict[str, str]) -> dict[str, Any] | None:
    parts: list[Part] = []
    for block in message["content"]:
        if block["type"] == "tool_use":
            names[block["id"]] = block["name"]
        if block["type"] == "tool_result":
            parts.extend(_response(block, names))
        else:
            part = _part(block)
            if part is not None:
                parts.append(part)
    if not parts:
        return None
    return {"role": "model" if message["role"] == "assistant" else "user", "parts": parts}


def gemini_function(spec: Spec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": spec["name"]}
    if spec.get("description"):
        function["description"] = spec["description"]
    function["parametersJsonSchema"] = spec.get("input_schema", OPEN_SCHEMA)
    return function


def to_gemini(ctx: Context) -> dict[str, Any]:
    """The model is in Gemini's URL, not its body; empty parts are left out."""
    request: dict[str, Any] = {}
    names: dict[str, str] = {}
    contents: list[dict[str, Any]] = []
    for message in ctx.messages:
        content = _content(message, names)
        if content is None:
            continue
        if contents and contents[-1]["role"] == content["role"]:  # turns alternate
            contents[-1] = {"role": content["role"],
                            "parts": [*contents[-1]["parts"], *content["parts"]]}  # fmt: skip
        else:
            contents.append(content)
    request["contents"] = contents
    if ctx.system:
        request["systemInstruction"] = {"parts": [{"text": ctx.system}]}
    if ctx.tools:
        request["tools"] = [{"functionDeclarations": [gemini_function(s) for s in ctx.tools]}]
    return request
