"""The OpenAI Agents SDK ``Session`` adapter, run by the real ``openai-agents`` package.

An Agent with a fake model (canned responses: a tool call, then an answer)
runs against a real ctxstore server through the client.  The same run on
the SDK's own ``SQLiteSession`` is the reference: the adapter must hand back
exactly the items the SDK's own store does, and the model must be fed the
same history on the next run.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, ModelResponse, Runner, SQLiteSession, Usage, function_tool
from agents.memory.session import Session as SessionProtocol
from agents.models.interface import Model
from agents.tracing import set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from api.client import AsyncClient, Client
from api.client.agents import CtxStoreSession

set_tracing_disabled(True)


def _message(text: str, n: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{n}", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )  # fmt: skip


def _call(call_id: str, city: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc_{call_id}", call_id=call_id, name="get_weather",
                                    arguments=f'{{"city": "{city}"}}', type="function_call",
                                    status="completed")  # fmt: skip


def scripted_turns() -> list[list[Any]]:
    """Run 1: reasoning + two parallel calls, then the answer.  Run 2: a plain answer."""
    thinking = ResponseReasoningItem(
        id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text="Two cities.")]
    )
    return [
        [thinking, _call("call_p", "Paris"), _call("call_l", "Lyon")],
        [_message("Paris: sunny. Lyon: rain.", 1)],
        [_message("You asked about Paris and Lyon.", 2)],
    ]


class FakeModel(Model):
    """Canned responses in order; remembers what it was fed each time."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = turns
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any, *,
                           previous_response_id: Any, conversation_id: Any,
                           prompt: Any) -> ModelResponse:  # fmt: skip
        self.inputs.append(copy.deepcopy(input))
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return {"Paris": "sunny", "Lyon": "rain"}[city]


async def conversation(session: Any) -> tuple[list[Any], list[Any]]:
    """Two runs of the agent on ``session``: what the model was fed, and the items after."""
    model = FakeModel(scripted_turns())
    agent = Agent(name="weather", instructions="Answer briefly.", model=model,
                  tools=[get_weather])  # fmt: skip
    first = await Runner.run(agent, "Weather in Paris and Lyon?", session=session)
    assert first.final_output == "Paris: sunny. Lyon: rain."
    second = await Runner.run(agent, "What did I ask?", session=session)
    assert second.final_output == "You asked about Paris and Lyon."
    return model.inputs, await all_items(session)


async def all_items(session: Any) -> list[Any]:
    """The stored items: the adapter's verbatim ones, the SDK's own session's all of them."""
    if isinstance(session, CtxStoreSession):
        return await session.get_all_items()
    items: list[Any] = await session.get_items()
    return items


def gist(items: list[Any]) -> list[tuple[str, ...]]:
    """What a model reads of input items: roles and texts, calls and their outputs."""
    out: list[tuple[str, ...]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            content = item["content"]
            text = content if isinstance(content, str) else "".join(p["text"] for p in content)
            out.append((item["role"], text))
        elif kind == "function_call":
            out.append(("call", item["call_id"], item["name"], item["arguments"]))
        elif kind == "function_call_output":
            out.append(("output", item["call_id"], item["output"]))
    return out


def test_an_agent_run_round_trips_through_ctxstore(live_server: str) -> None:
    async def run() -> None:
        async with AsyncClient(live_server) as ctx:
            session = await CtxStoreSession.create(ctx, title="weather", model="openai:gpt-4o")
            assert isinstance(session, SessionProtocol)
            fed, items = await conversation(session)
            reference = SQLiteSession("reference")
            fed_ref, items_ref = await conversation(reference)
            assert items == items_ref  # exactly the SDK's own items, in order, kept
            assert await session.get_all_items(limit=2) == items_ref[-2:]
            # the model was fed ctxstore's managed context: well inside the window here,
            # so the same conversation (reasoning is OpenAI's own, not re-sent)
            assert [gist(fed_call) for fed_call in fed] == [gist(ref) for ref in fed_ref]
            managed = await session.get_items()
            assert gist(managed) == gist(items_ref)
            assert await session.get_items(limit=2) == managed[-2:]

    asyncio.run(run())
    sid = _only_session(live_server)
    with Client(live_server) as ctx:
        dag = ctx.dag(sid).nodes
        roles = [(n.role, n.version_kind) for n in dag]
        # user; a turn (reasoning + 2 calls); 2 results (versions of the calls); the
        # answer; then the second run's user and answer
        assert [r for r, _ in roles] == ["user", "assistant", "tool", "tool", "tool", "tool",
                                         "assistant", "user", "assistant"]  # fmt: skip
        context = ctx.context(sid).items
        tools = [i for i in context if i.role == "tool"]
        assert [(t.name, t.rendered) for t in tools] == [("get_weather", "sunny"),
                                                         ("get_weather", "rain")]  # fmt: skip
        request = ctx.render(sid, shape="openai").request
        calls = [c for msg in request["messages"] for c in msg.get("tool_calls") or []]
        assert [c["function"]["name"] for c in calls] == ["get_weather", "get_weather"]


def test_pop_and_clear_move_the_head_and_delete_nothing(live_server: str) -> None:
    async def run() -> None:
        async with AsyncClient(live_server) as ctx:
            session = await CtxStoreSession.create(ctx)
            _, items = await conversation(session)
            events = (await ctx.get_session(session.session_id)).counts.events
            assert await session.pop_item() == items[-1]
            assert await session.get_all_items() == items[:-1]
            while len(await session.get_all_items()) > 2:
                await session.pop_item()
            assert await session.get_all_items() == items[:2]
            assert await session.pop_item() == items[1]
            assert await session.pop_item() == items[0]
            assert await session.pop_item() is None and await session.get_all_items() == []
            await session.add_items([{"role": "user", "content": "again"}])
            assert await session.get_all_items() == [{"role": "user", "content": "again"}]
            await session.clear_session()
            assert await session.get_all_items() == []
            await session.clear_session()  # already empty: nothing stored
            info = await ctx.get_session(session.session_id)
            assert info.counts.events > events  # moving the head is recorded, never deleted
            dag = (await ctx.dag(session.session_id)).nodes
            assert {"msg_2", "call_p"} <= {item.get("id") or item.get("call_id")
                                           for item in _dag_items(ctx, dag)}  # fmt: skip
            fresh = {"role": "user", "content": "fresh start"}
            await session.add_items([fresh])
            assert await session.get_all_items() == [fresh]
            # reasoning and the message it led to ride on one assistant node: popping the
            # message records an edit of that node carrying the reasoning alone
            turn = [
                scripted_turns()[0][0].model_dump(mode="json", exclude_unset=True),
                _message("Hello.", 9).model_dump(mode="json", exclude_unset=True),
            ]
            await session.add_items(turn)
            assert await session.get_all_items() == [fresh, *turn]
            assert await session.pop_item() == turn[1]
            assert await session.get_all_items() == [fresh, turn[0]]
            kinds = [n.version_kind for n in (await ctx.dag(session.session_id)).nodes]
            assert kinds[-1] == "edit"

    asyncio.run(run())


def _dag_items(ctx: AsyncClient, dag: list[Any]) -> list[dict[str, Any]]:
    with Client(str(ctx._http.base_url)) as sync:
        sid = _only_session(str(ctx._http.base_url))
        out: list[dict[str, Any]] = []
        for node in dag:
            out += sync.nodes(sid, head=node.node_id).nodes[-1].metadata.get("agents_items", [])
        return out


def _only_session(base: str) -> str:
    with Client(base) as ctx:
        [only] = ctx.list_sessions().sessions
        return only.session_id


@pytest.mark.parametrize("items", [[{"type": "item_reference", "id": "x"}]])
def test_items_without_a_role_in_ctxstore_still_round_trip(live_server: str,
                                                           items: list[Any]) -> None:  # fmt: skip
    async def run() -> None:
        async with AsyncClient(live_server) as ctx:
            session = await CtxStoreSession.create(ctx)
            await session.add_items([{"role": "user", "content": "hi"}, *items])
            assert await session.get_all_items() == [{"role": "user", "content": "hi"}, *items]

    asyncio.run(run())


def test_two_adapters_on_one_session_interleave_whole_batches(live_server: str) -> None:
    """Each adapter reuses what it planned last; the other's write makes it re-read."""

    async def run() -> None:
        async with AsyncClient(live_server) as ctx:
            first = await CtxStoreSession.create(ctx)
            second = CtxStoreSession(first.session_id, ctx)
            expected: list[dict[str, Any]] = []
            for n in range(4):
                for session, who in ((first, "a"), (second, "b")):
                    batch = [{"role": "user", "content": f"{who}{n}"},
                             {"type": "function_call", "call_id": f"{who}c{n}", "name": "f",
                              "arguments": "{}"},
                             {"type": "function_call_output", "call_id": f"{who}c{n}",
                              "output": "ok"}]  # fmt: skip
                    await session.add_items(batch)
                    expected += batch
            assert await first.get_all_items() == expected == await second.get_all_items()
            fed = await first.get_items()
            outputs = [i["call_id"] for i in fed if i["type"] == "function_call_output"]
            calls = [i["call_id"] for i in fed if i["type"] == "function_call"]
            assert outputs == calls == [f"{w}c{n}" for n in range(4) for w in "ab"]

    asyncio.run(run())
