"""A LangChain v1 ``create_agent`` middleware that keeps the agent's conversation in ctxstore
and feeds the model ctxstore's managed context instead of the whole history.

    from langchain.agents import create_agent
    from ctxstore_client import Client
    from ctxstore_client.langchain import CtxStoreMiddleware

    ctx = Client("http://127.0.0.1:8000", api_key=KEY)
    memory = CtxStoreMiddleware.create(ctx, title="support", model="openai:gpt-4o")
    agent = create_agent(model, tools, system_prompt="...", middleware=[memory])

One middleware is one ctxstore session (``memory.session_id``).  Before each
model call (``wrap_model_call``) it records the messages of the agent's state
it has not recorded yet, in one batch:

* the agent's system prompt -> a ``system`` node (again only when it changes);
* ``HumanMessage`` -> ``user``; ``SystemMessage`` -> ``system``;
* ``AIMessage`` -> ``assistant`` (its text as output), then one ``tool`` node
  per tool call under it (call id, name, arguments);
* ``ToolMessage`` -> a newer version of its call's ``tool`` node, with the
  result as output (what the context shows from then on).

Each node carries the message's id (``metadata.langchain_id``), so a
middleware over an existing session (``CtxStoreMiddleware.open``) skips what
the session already holds.

Then it asks for the head's render (``shape=openai``: aged tool results,
summaries, folds, all inside ``window - output_reserve``), turns it back
into LangChain messages and hands the model those, with the system prompt
taken from the render (so the prompt is counted in the window too).  The
model's answer is recorded right after the call.  The agent's own state
(and any checkpointer) still holds everything, as does ctxstore's log.

``CtxStoreMiddleware.create(ctx, ..., recall=True)`` (or ``open``) also registers
the ``recall`` tool (``ctxstore_client.recall_tool``) with the agent, for a
deployment whose policy lists it: the model reads folded content back
through it, and its call and result are recorded like any tool's.

LangChain is imported here only: ``ctxstore_client`` itself never imports this
module, so the core client works without the ``langchain`` extra.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, StructuredTool

from ctxstore_client.agents_planner import _call_id
from ctxstore_client.errors import NotFound
from ctxstore_client.recall_tool import RECALL_SPEC, run_recall
from ctxstore_client.sync import Client

Entry = dict[str, Any]


class CtxStoreMiddleware(AgentMiddleware):
    """Records the agent's messages into one ctxstore session and feeds the model its render."""

    def __init__(self, client: Client, session_id: str, recall: bool = False) -> None:
        super().__init__()
        self.client = client
        self.session_id = session_id
        self.tools: list[BaseTool] = [self.recall_tool()] if recall else []
        self._seen: set[str] = set()  # ids of the state's messages already recorded
        self._calls: dict[str, Entry] = {}  # LangChain tool call id -> its tool node's fields
        self._system: str | None = None  # the system prompt last recorded
        self._loaded = False  # what the session already holds is read on first use

    @classmethod
    def create(cls, client: Client, title: str = "", model: str = "openai:gpt-4o",
               context_window: int | None = None,
               recall: bool = False) -> CtxStoreMiddleware:  # fmt: skip
        started = client.start_session(title, model, context_window=context_window)
        return cls(client, started.session_id, recall)

    @classmethod
    def open(cls, client: Client, session_id: str, recall: bool = False) -> CtxStoreMiddleware:
        """A middleware over an existing session (say, after a restart, with the agent's
        checkpointer): the messages it already holds are not recorded again."""
        client.get_session(session_id)  # unknown (or another tenant's): NotFound now
        return cls(client, session_id, recall)

    def recall_tool(self) -> BaseTool:
        """A LangChain tool named ``recall`` searching this session's folded content."""

        def recall(**arguments: Any) -> str:
            return run_recall(self.client, self.session_id, arguments)

        return StructuredTool.from_function(
            recall, name=RECALL_SPEC["name"], description=RECALL_SPEC["description"],
            args_schema=RECALL_SPEC["input_schema"], infer_schema=False,
        )  # fmt: skip

    # ------------------------------------------------------------- hooks

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        response = handler(self.managed(request))
        self.record([], response.result)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        managed = await asyncio.to_thread(self.managed, request)
        response = await handler(managed)
        await asyncio.to_thread(self.record, [], response.result)
        return response

    # ----------------------------------------------------------- the work

    def managed(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """``request`` with the new messages recorded and ctxstore's render as its messages."""
        system = request.system_message
        self.record([system] if system is not None else [], request.messages)
        messages = self.messages()
        if not messages:
            return request
        return request.override(system_message=None, messages=messages)

    def messages(self) -> list[AnyMessage]:
        """The head's render as LangChain messages ([] before anything is recorded)."""
        try:
            rendered = self.client.render(self.session_id, shape="openai")
        except NotFound as exc:
            if exc.code == "session_not_found":
                raise
            return []
        return to_messages(rendered.request.get("messages") or [])

    def record(self, system: Sequence[BaseMessage], messages: Sequence[BaseMessage]) -> None:
        """Append, in one batch, the messages not recorded yet."""
        if not self._loaded:
            self._load()
        entries: list[Entry] = []
        for prompt in system:
            text = _text(prompt.content)
            if text != self._system:
                entries.append(_entry("system", input=text))
                self._system = text
        for message in messages:
            if message.id is None:
                message.id = f"lc-{uuid.uuid4().hex}"  # the state keeps it: not recorded twice
            if message.id in self._seen:
                continue
            self._seen.add(message.id)
            entries += self._entries(message)
        if entries:
            self.client.append_nodes(self.session_id, entries)

    def _load(self) -> None:
        """The ids, tool calls and system prompt the session's branch already holds."""
        for node in self.client.nodes(self.session_id).nodes:
            meta = node.metadata
            if meta.get("langchain_id"):
                self._seen.add(str(meta["langchain_id"]))
            if node.role == "tool" and meta.get("langchain_call_id") and node.output is None:
                self._calls[str(meta["langchain_call_id"])] = {
                    "caller": node.parent, "call_id": node.call_id,
                    "name": node.name, "input": node.input}  # fmt: skip
            if node.role == "system" and "langchain_id" not in meta:
                self._system = _text(node.input)
        self._loaded = True

    def _entries(self, message: BaseMessage) -> list[Entry]:
        meta = {"langchain_id": message.id}
        if isinstance(message, AIMessage):
            turn = _entry("assistant", output=_text(message.content) or None, metadata=meta)
            out = [turn]
            for call in message.tool_calls:
                fields = {"caller": turn["node_id"], "call_id": _call_id(call.get("id")),
                          "name": str(call["name"])[:128], "input": call["args"]}  # fmt: skip
                self._calls[str(call.get("id"))] = fields
                called = {**meta, "langchain_call_id": call.get("id")}
                out.append(_entry("tool", metadata=called, **fields))
            return out
        if isinstance(message, ToolMessage):
            known = self._calls.get(message.tool_call_id)
            if known is not None:
                return [_entry("tool", output=_text(message.content), metadata=meta, **known)]
            return [_entry("user", input=_text(message.content), metadata=meta)]  # no call here
        role = "system" if isinstance(message, SystemMessage) else "user"
        return [_entry(role, input=_text(message.content), metadata=meta)]


def _entry(role: str, **fields: Any) -> Entry:
    return {"node_id": f"lc-{uuid.uuid4().hex}", "role": role, **fields}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [p if isinstance(p, str) else str(p.get("text") or "") for p in content or []]
    return "".join(parts)


def to_messages(messages: Sequence[Mapping[str, Any]]) -> list[AnyMessage]:
    """OpenAI chat messages (a ``shape=openai`` render) as LangChain messages."""
    out: list[AnyMessage] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            out.append(SystemMessage(content=_text(content)))
        elif role == "user":
            out.append(HumanMessage(content=content if isinstance(content, list) else
                                    _text(content)))  # fmt: skip
        elif role == "tool":
            out.append(ToolMessage(content=_text(content),
                                   tool_call_id=str(message.get("tool_call_id"))))  # fmt: skip
        else:
            calls = [{"name": str((c.get("function") or {}).get("name")), "id": str(c.get("id")),
                      "args": _args((c.get("function") or {}).get("arguments")),
                      "type": "tool_call"} for c in message.get("tool_calls") or []]  # fmt: skip
            out.append(AIMessage(content=_text(content), tool_calls=calls))
    return out


def _args(raw: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {"input": raw}
    return parsed if isinstance(parsed, dict) else {"input": parsed}
