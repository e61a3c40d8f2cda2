"""ctxstore's rendered request as the Responses API input items the Agents SDK feeds a model.

The adapter (``ctxstore_client.agents``) asks ctxstore for the head rendered in
the OpenAI Chat Completions shape, which is the managed context: aged tool
results, summaries, the window guard's folds, all inside
``window - output_reserve``.  Here each chat message becomes the input items
the SDK's models take:

* ``system`` -> a ``message`` item with role ``system`` (``input_text``);
* ``user`` -> a ``message`` item (``input_text``, ``input_image``, ``input_file``);
* ``assistant`` -> a ``message`` item with its text, then one ``function_call``
  per tool call (the call id ctxstore kept, the arguments as JSON text);
* ``tool`` -> a ``function_call_output`` for its call.

A limit that would cut a call from its output drops the orphaned output:
the SDK refuses an output whose call it was not given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Item = dict[str, Any]


def _part(part: Mapping[str, Any]) -> Item:
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url") or {}
        return {"type": "input_image", "image_url": str(image.get("url", "")),
                "detail": image.get("detail") or "auto"}  # fmt: skip
    if kind == "file":
        file = part.get("file") or {}
        return {"type": "input_file", "filename": file.get("filename"),
                "file_data": file.get("file_data")}  # fmt: skip
    return {"type": "input_text", "text": str(part.get("text") or "")}


def _content(content: Any) -> list[Item]:
    if isinstance(content, list):
        return [_part(p) for p in content if isinstance(p, Mapping)]
    return [{"type": "input_text", "text": "" if content is None else str(content)}]


def _message(message: Mapping[str, Any]) -> list[Item]:
    role = message.get("role")
    if role in ("system", "developer", "user"):
        return [{"type": "message", "role": role, "content": _content(message.get("content"))}]
    if role == "tool":
        return [{"type": "function_call_output", "call_id": str(message.get("tool_call_id")),
                 "output": str(message.get("content") or "")}]  # fmt: skip
    out: list[Item] = []
    text = message.get("content")
    if text:
        out.append({"type": "message", "role": "assistant", "content": str(text)})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        out.append({"type": "function_call", "call_id": str(call.get("id")),
                    "name": str(function.get("name")),
                    "arguments": str(function.get("arguments") or "{}")})  # fmt: skip
    return out


def responses_items(request: Mapping[str, Any]) -> list[Item]:
    """The ``messages`` of an OpenAI-shape render as Responses API input items."""
    return [item for message in request.get("messages") or [] for item in _message(message)]


def last_items(items: Sequence[Item], limit: int | None) -> list[Item]:
    """The last ``limit`` items (all when None), without an output whose call is cut off."""
    if limit is None:
        return list(items)
    kept = list(items[-limit:]) if limit > 0 else []
    calls = {item.get("call_id") for item in kept if item.get("type") == "function_call"}
    return [
        item
        for item in kept
        if item.get("type") != "function_call_output" or item.get("call_id") in calls
    ]
