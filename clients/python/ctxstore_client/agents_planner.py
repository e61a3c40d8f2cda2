"""How the Agents SDK's items become ctxstore nodes (``ctxstore_client.agents`` says the mapping).

``Planner`` turns new items into batch entries continuing the branch; the
helpers read an item's kind and its assistant text.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore_client import session_responses as sr

KEY = "agents_items"
MODEL_SIDE = frozenset({"reasoning", "web_search_call", "file_search_call", "computer_call",
                        "code_interpreter_call", "image_generation_call", "local_shell_call",
                        "mcp_call", "mcp_list_tools", "mcp_approval_request",
                        "shell_call", "apply_patch_call", "custom_tool_call"})  # fmt: skip
Item = dict[str, Any]


class Planner:
    """Turns new SDK items into batch entries, continuing the branch as it stands."""

    def __init__(self, nodes: Sequence[sr.Node]) -> None:
        self.entries: list[dict[str, Any]] = []
        self.calls: dict[str, dict[str, Any]] = {}  # SDK call id -> its tool node's fields
        self.turn: str | None = None  # the assistant node of the model response under way
        self.pending: list[Item] = []  # model-side items waiting for their turn's node
        for node in nodes:
            for item in node.metadata.get(KEY) or []:
                self._remember(node.node_id, node.role, node.parent, node.name, node.input,
                               node.call_id, item)  # fmt: skip

    def _remember(self, node_id: str, role: str, parent: str | None, name: str | None,
                  input: Any, call_id: str | None, item: Item) -> None:  # fmt: skip
        kind = _kind(item)
        if kind == "function_call" and parent is not None:
            self.calls[str(item.get("call_id"))] = {"caller": parent, "call_id": call_id,
                                                   "name": name, "input": input}  # fmt: skip
        if kind in ("assistant", "function_call", "model"):
            self.turn = node_id if role == "assistant" else parent
        else:
            self.turn = None

    def plan(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        for item in items:
            self._one(item)
        self._flush()
        return self.entries

    def _add(self, carried: list[Item], **fields: Any) -> str:
        node_id = f"ag-{uuid.uuid4().hex}"
        self.entries.append({"node_id": node_id, "metadata": {KEY: carried}, **fields})
        return node_id

    def _flush(self) -> None:
        """Model-side items with no message after them: a turn of their own."""
        if self.pending:
            self.turn = self._add(self.pending, role="assistant")
            self.pending = []

    def _one(self, item: Item) -> None:
        kind = _kind(item)
        if kind == "model":
            if self.turn is None:
                self.pending.append(item)
            else:  # after this response's message or calls: a node of its own
                self.turn = self._add([item], role="assistant")
            return
        if kind == "assistant":
            carried, self.pending = [*self.pending, item], []
            self.turn = self._add(carried, role="assistant", output=_assistant_text(carried))
            return
        if kind == "function_call":
            if self.turn is None:
                carried, self.pending = self.pending, []
                self.turn = self._add(carried, role="assistant")
            fields = {"caller": self.turn, "call_id": _call_id(item.get("call_id")),
                      "name": str(item.get("name") or "tool")[:128],
                      "input": _arguments(item.get("arguments"))}  # fmt: skip
            self._add([item], role="tool", **fields)
            self.calls[str(item.get("call_id"))] = fields
            return
        self._flush()
        self.turn = None
        if kind == "function_call_output":
            call = self.calls.get(str(item.get("call_id")))
            if call is not None:
                self._add([item], role="tool", output=item.get("output"), **call)
                return
            self._add([item], role="user", input=item.get("output"))  # its call is not here
            return
        if kind in ("user", "system"):
            self._add([item], role=kind, input=item.get("content"))
            return
        self._add([item], role="user")  # an input item ctxstore has no role for


def _plain(item: Any) -> Item:
    if isinstance(item, Mapping):
        copied: Item = json.loads(json.dumps(dict(item)))  # a plain, detached copy
        return copied
    dump = getattr(item, "model_dump", None)
    if dump is not None:
        plain: Item = dump(mode="json", exclude_unset=True)
        return plain
    raise TypeError(f"not an Agents SDK item: {type(item).__name__}")


def _kind(item: Mapping[str, Any]) -> str:
    """user | system | assistant | function_call | function_call_output | model | other."""
    kind = item.get("type")
    if kind in (None, "message") and "role" in item:
        role = item["role"]
        return "system" if role in ("system", "developer") else str(role)
    if kind in ("function_call", "function_call_output"):
        return str(kind)
    return "model" if kind in MODEL_SIDE else "other"


def _assistant_text(items: Sequence[Mapping[str, Any]]) -> str | None:
    texts: list[str] = []
    for item in items:
        if _kind(item) != "assistant":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(p.get("text") or p.get("refusal") or "") for p in content
                      if isinstance(p, Mapping)]  # fmt: skip
    return "".join(texts) if texts else None


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _call_id(raw: Any) -> str:
    """The SDK's call id when ctxstore can keep it (1-64 characters, no control characters)."""
    text = str(raw or "")
    if 0 < len(text) <= 64 and not any(c in text for c in "\x00\r\n\t"):
        return text
    return "c-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _items(nodes: Sequence[sr.Node]) -> list[Item]:
    return [item for node in nodes for item in node.metadata.get(KEY) or []]
