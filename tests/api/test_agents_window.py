"""The Agents SDK fed through ``CtxStoreSession`` stays inside the window, turn after turn.

The real ``agents.Runner`` drives an agent with a fake model over 300 turns
on a 16k-window session (a tool call every third turn, with a long result),
against a real server.  The conversation grows far past the window; every
input the model is handed must still fit it, counted with the project's own
estimate (``domain.tokens.item_tokens``), and every tool output must come
with its call.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, ModelResponse, Runner, Usage, function_tool
from agents.models.interface import Model
from agents.tracing import set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from api.client import AsyncClient
from api.client.agents import CtxStoreSession
from domain.tokens import item_tokens

set_tracing_disabled(True)
TURNS, WINDOW, INSTRUCTIONS = 300, 16_000, "Answer from the logs."
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def prose(seed: int, words: int) -> str:
    return " ".join(f"{WORDS[(seed * 7 + i) % len(WORDS)]}{(seed + i) % 97}" for i in range(words))


class Scripted(Model):
    """A call to ``read_log`` on every third turn, else (and after the result) an answer."""

    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any, *,
                           previous_response_id: Any, conversation_id: Any,
                           prompt: Any) -> ModelResponse:  # fmt: skip
        self.inputs.append(copy.deepcopy(list(input)))
        n = len(self.inputs)
        last = input[-1]
        if last.get("type") != "function_call_output" and (n % 3 == 0):
            call = ResponseFunctionToolCall(id=f"fc_{n}", call_id=f"call_{n}", name="read_log",
                                            arguments=json.dumps({"part": n}),
                                            type="function_call", status="completed")  # fmt: skip
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=prose(n, 90), annotations=[])
        message = ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant",
                                        status="completed", content=[text])  # fmt: skip
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def read_log(part: int) -> str:
    """One part of the build log."""
    return prose(part, 700)


def tokens_of(item: dict[str, Any]) -> int:
    """The project's estimate of one input item as a model is fed it."""
    kind = item.get("type", "message")
    if kind == "function_call":
        return item_tokens(item["arguments"], name=item["name"])
    if kind == "function_call_output":
        return item_tokens(str(item["output"]))
    content = item.get("content")
    if isinstance(content, str):
        return item_tokens(content)
    return item_tokens("\n".join(str(part.get("text", "")) for part in content or []))


def pairs_intact(items: list[dict[str, Any]]) -> bool:
    """Every output follows its call, and every call has its output."""
    called: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if item.get("type") == "function_call":
            called.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            if item["call_id"] not in called:
                return False
            answered.add(item["call_id"])
    return called == answered


def test_300_turns_at_16k_every_model_input_fits(live_server: str) -> None:
    model = Scripted()
    agent = Agent(name="logs", instructions=INSTRUCTIONS, model=model, tools=[read_log])

    async def run() -> tuple[int, int, dict[str, Any]]:
        async with AsyncClient(live_server) as ctx:
            session = await CtxStoreSession.create(ctx, title="logs", model="openai:gpt-4o",
                                                   context_window=WINDOW)  # fmt: skip
            for turn in range(TURNS):
                await Runner.run(agent, f"Turn {turn}: {prose(turn, 40)}", session=session)
            stored = len(await session.get_all_items())
            managed = len(await session.get_items())
            budget = (await ctx.budget(session.session_id)).model_dump()
            return stored, managed, budget

    stored, managed, budget = asyncio.run(run())
    limit = budget["limit"]
    assert limit == WINDOW - budget["output_reserve"]
    assert len(model.inputs) > TURNS  # the tool turns call the model twice
    sizes = [item_tokens(INSTRUCTIONS) + sum(tokens_of(i) for i in fed) for fed in model.inputs]
    total = sum(tokens_of(i) for fed in model.inputs[-1:] for i in fed)
    print(
        f"\n{len(model.inputs)} model calls; largest input {max(sizes):,} tokens (limit "
        f"{limit:,}); {stored} items stored, {managed} fed"
    )
    assert max(sizes) <= limit, (max(sizes), limit)  # every call, inside window - reserve
    assert all(pairs_intact(fed) for fed in model.inputs)
    # the session holds the whole conversation; the model got the managed part of it
    assert stored > 3 * managed and total < limit
    assert not budget["over_window"]
