"""A LangChain ``create_agent`` agent fed through ``CtxStoreMiddleware`` stays inside the window.

A real agent (``langchain.agents.create_agent``, a real tool, an in-memory
checkpointer so the agent's own state holds the whole conversation) runs
100 turns on a 16k-window session against a real server, with a fake chat
model that binds the tools and calls ``read_log`` every third turn (a long
result).  Every input the model is handed must fit ``window -
output_reserve``, counted with the project's estimate
(``domain.tokens.item_tokens``); every ``ToolMessage`` must answer a tool
call of an ``AIMessage`` in the same input; and ctxstore's session must hold
the whole history.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxstore_client import Client
from ctxstore_client.langchain import CtxStoreMiddleware
from domain.tokens import item_tokens

TURNS, WINDOW, PROMPT = 100, 16_000, "Answer from the logs."
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def prose(seed: int, words: int) -> str:
    return " ".join(f"{WORDS[(seed * 7 + i) % len(WORDS)]}{(seed + i) % 97}" for i in range(words))


class Scripted(BaseChatModel):
    """A call to ``read_log`` on every third call, else (and after a result) an answer."""

    inputs: list[list[BaseMessage]] = []
    parallel: int = 1  # tool calls per calling turn

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        self.inputs.append(list(messages))
        n = len(self.inputs)
        if not isinstance(messages[-1], ToolMessage) and n % 3 == 0:
            calls = [{"name": "read_log", "args": {"part": n + i}, "id": f"call_{n}_{i}",
                      "type": "tool_call"} for i in range(self.parallel)]  # fmt: skip
            answer = AIMessage(content="", tool_calls=calls)
        else:
            answer = AIMessage(content=prose(n, 90))
        return ChatResult(generations=[ChatGeneration(message=answer)])


@tool
def read_log(part: int) -> str:
    """One part of the build log."""
    return prose(part, 700)


def tokens_of(message: BaseMessage) -> int:
    """The project's estimate of one message as a model is fed it."""
    text = message.text if isinstance(message.content, list) else str(message.content)
    total = item_tokens(text)
    if isinstance(message, AIMessage):
        total += sum(item_tokens(json.dumps(c["args"]), name=c["name"]) for c in message.tool_calls)
    return total


def pairs_intact(messages: list[BaseMessage]) -> bool:
    """Every ToolMessage answers a tool call made earlier in the same input, and every
    tool call is answered (what providers require)."""
    called: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            called |= {str(c["id"]) for c in message.tool_calls}
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in called:
                return False
            answered.add(message.tool_call_id)
    return called == answered


def test_100_turns_at_16k_every_model_input_fits(live_server: str) -> None:
    model = Scripted(inputs=[])
    with Client(live_server) as ctx:
        memory = CtxStoreMiddleware.create(ctx, title="logs", context_window=WINDOW)
        agent = create_agent(model, [read_log], system_prompt=PROMPT, middleware=[memory],
                             checkpointer=InMemorySaver())  # fmt: skip
        config: Any = {"configurable": {"thread_id": "logs"}}
        for turn in range(TURNS):
            agent.invoke({"messages": [("user", f"Turn {turn}: {prose(turn, 40)}")]}, config)
        state = agent.get_state(config).values["messages"]
        stored = ctx.nodes(memory.session_id).nodes
        budget = ctx.budget(memory.session_id).model_dump()

    limit = budget["limit"]
    assert limit == WINDOW - budget["output_reserve"]
    assert len(model.inputs) > TURNS  # the tool turns call the model twice
    sizes = [sum(tokens_of(m) for m in fed) for fed in model.inputs]
    print(f"\n{len(model.inputs)} model calls; largest input {max(sizes):,} tokens "
          f"(limit {limit:,}); {len(state)} messages in the agent's state, "
          f"{len(model.inputs[-1])} fed last")  # fmt: skip
    assert max(sizes) <= limit, (max(sizes), limit)  # every call, inside window - reserve
    assert all(pairs_intact(fed) for fed in model.inputs)
    assert all(isinstance(fed[0], SystemMessage) and fed[0].content == PROMPT
               for fed in model.inputs)  # fmt: skip
    # ctxstore holds the whole history: every state message (and the prompt), by its id
    recorded = {n.metadata.get("langchain_id") for n in stored}
    assert {m.id for m in state} <= recorded
    assert [n.role for n in stored].count("user") == TURNS
    tool_results = [n for n in stored if n.role == "tool" and n.output is not None]
    assert len(tool_results) == sum(isinstance(m, ToolMessage) for m in state) > 30
    assert len(model.inputs[-1]) < len(state) / 3  # the model got the managed part of it
    assert not budget["over_window"]


def test_ainvoke_with_parallel_calls_keeps_pairs(live_server: str) -> None:
    """The asyncio path (``awrap_model_call``), two tool calls per calling turn."""
    model = Scripted(inputs=[], parallel=2)
    with Client(live_server) as ctx:
        memory = CtxStoreMiddleware.create(ctx, title="logs", context_window=WINDOW)
        agent = create_agent(model, [read_log], system_prompt=PROMPT, middleware=[memory],
                             checkpointer=InMemorySaver())  # fmt: skip
        config: Any = {"configurable": {"thread_id": "logs"}}

        async def run() -> None:
            for turn in range(20):
                await agent.ainvoke({"messages": [("user", f"Turn {turn}")]}, config)

        asyncio.run(run())
        state = agent.get_state(config).values["messages"]
        stored = ctx.nodes(memory.session_id).nodes
        limit = ctx.budget(memory.session_id).limit

    assert max(sum(tokens_of(m) for m in fed) for fed in model.inputs) <= limit
    assert all(pairs_intact(fed) for fed in model.inputs)
    assert any(len(m.tool_calls) == 2 for fed in model.inputs for m in fed
               if isinstance(m, AIMessage))  # fmt: skip
    assert {m.id for m in state} <= {n.metadata.get("langchain_id") for n in stored}


def test_the_core_client_imports_without_langchain() -> None:
    """``ctxstore_client`` and its other modules never import LangChain."""
    code = (
        "import sys, pkgutil, importlib, ctxstore_client\n"
        "for name in ('langchain', 'langchain_core', 'langgraph'): sys.modules[name] = None\n"
        "for m in pkgutil.iter_modules(ctxstore_client.__path__):\n"
        "    if m.name not in ('langchain', 'agents'):\n"
        "        importlib.import_module('ctxstore_client.' + m.name)\n"
        "assert not any(n.startswith('lang') and sys.modules[n] for n in sys.modules)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr


def test_a_reopened_session_records_nothing_twice(live_server: str) -> None:
    """A new middleware over the same session and checkpointer (a restart) goes on where the
    first stopped: no message and no system prompt is stored twice."""
    model, saver = Scripted(inputs=[]), InMemorySaver()
    config: Any = {"configurable": {"thread_id": "logs"}}
    with Client(live_server) as ctx:
        first = CtxStoreMiddleware.create(ctx, title="logs", context_window=WINDOW)
        for turn in range(4):
            memory = first if turn < 2 else CtxStoreMiddleware.open(ctx, first.session_id)
            agent = create_agent(model, [read_log], system_prompt=PROMPT, checkpointer=saver,
                                 middleware=[memory])  # fmt: skip
            agent.invoke({"messages": [("user", f"Turn {turn}")]}, config)
        state = agent.get_state(config).values["messages"]
        stored = ctx.nodes(first.session_id).nodes

    # one node per message: user, assistant, and a tool call's result (its calls share the id
    # of the AIMessage that made them)
    results = [n for n in stored if n.role == "tool" and n.output is not None]
    ids = [n.metadata.get("langchain_id") for n in stored if n.role in ("user", "assistant")]
    ids += [n.metadata.get("langchain_id") for n in results]
    assert len(ids) == len(set(ids)) and set(ids) == {m.id for m in state}
    assert [n.role for n in stored].count("system") == 1
    assert all(pairs_intact(fed) for fed in model.inputs)
