"""The ``recall`` tool run by the client: folded content comes back to the model.

Arguments are checked and answered as text (a tool result is read by the
model); against a real server whose policy lists the tool, ``run_recall``
finds what a summary folded away, and an Agents SDK agent (the real
``Runner``, a fake model) calls ``session.recall_tool()``, reads the hit, and
the call and its output are stored as an ordinary tool node.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from agents import Agent, FunctionTool, ModelResponse, Runner, Usage
from agents.models.interface import Model
from agents.tracing import set_tracing_disabled
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from api.client import AsyncClient, Client
from api.client.agents import CtxStoreSession
from ctxstore_client.errors import InvalidRequest
from ctxstore_client.langchain import CtxStoreMiddleware
from ctxstore_client.recall_tool import RECALL_SPEC, run_recall, run_recall_async
from tests.api.conftest import serving
from tests.conftest import IMMEDIATE_POLICY_JSON

set_tracing_disabled(True)
FACT = "Our ACME invoice number is INV-20931, due on 14 March."
RECALLING = json.dumps({**json.loads(IMMEDIATE_POLICY_JSON), "recall_tool": True})


@dataclass
class RecallHit:
    """A hit as ``GET /recall`` answers (``context_responses.RecallHit``'s fields)."""

    node_id: str
    session_id: str
    role: str
    state: str
    score: float
    text: str


@dataclass
class Recall:
    hits: list[RecallHit] = field(default_factory=list)


class Fake:
    """A client's ``recall``: canned hits, the calls it was asked."""

    def __init__(self, hits: list[RecallHit], refuse: bool = False) -> None:
        self.hits, self.refuse = hits, refuse
        self.asked: list[tuple[str, str, int, bool]] = []

    def recall(self, session_id: str, q: str, limit: int = 5, hidden: bool = False) -> Recall:
        self.asked.append((session_id, q, limit, hidden))
        if self.refuse:
            raise InvalidRequest(422, "invalid_query", "q must not be empty", {})
        return Recall(hits=self.hits[:limit])


class AsyncFake(Fake):
    async def recall(self, session_id: str, q: str, limit: int = 5,  # type: ignore[override]
                     hidden: bool = False) -> Recall:  # fmt: skip
        return Fake.recall(self, session_id, q, limit, hidden)


def hit(n: int, text: str, state: str = "summarized") -> RecallHit:
    return RecallHit(node_id=f"n{n}", session_id="s1", role="user", state=state, score=1.0 / n,
                     text=text)  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({}, "non-empty 'query'"),
        ('{"query": "  "}', "non-empty 'query'"),
        ({"query": 7}, "non-empty 'query'"),
        ("not json", "JSON object"),
        ("[1, 2]", "object of arguments"),
        ({"query": "x", "limit": 0}, "from 1 to 20"),
        ({"query": "x", "limit": 21}, "from 1 to 20"),
        ({"query": "x", "limit": True}, "from 1 to 20"),
        ({"query": "x", "limit": "3"}, "from 1 to 20"),
    ],
)
def test_bad_arguments_are_answered_not_raised(arguments: Any, error: str) -> None:
    fake = Fake([hit(1, FACT)])
    answer = run_recall(fake, "s1", arguments)
    assert answer.startswith("error: ") and error in answer
    assert fake.asked == []


def test_hits_read_as_compact_text_and_refusals_as_errors() -> None:
    fake = Fake([hit(1, FACT), hit(2, "x" * 2_500, state="cleared")])
    text = run_recall(fake, "s1", '{"query": "ACME invoice"}')
    assert fake.asked == [("s1", "ACME invoice", 5, True)]  # only what the model cannot see
    assert text.startswith("recall: 2 earlier item(s) matching 'ACME invoice'")
    assert f"[node n1 | user | summarized]\n{FACT}" in text
    assert "[node n2 | user | cleared]\n" + "x" * 2_000 + " [... 500 more characters]" in text
    assert run_recall(fake, "s1", {"query": "ACME", "limit": 1}).count("[node ") == 1
    assert "nothing earlier" in run_recall(Fake([]), "s1", {"query": "zebra"})
    refused = run_recall(Fake([], refuse=True), "s1", {"query": "x"})
    assert refused == "error: recall refused: q must not be empty"
    assert asyncio.run(run_recall_async(AsyncFake([hit(1, FACT)]), "s1", {"query": "A"})) == (
        run_recall(Fake([hit(1, FACT)]), "s1", {"query": "A"})
    )


# ----------------------------------------------------------- a real server


@pytest.fixture
def recalling_server(store_url: str) -> Iterator[str]:
    with serving(store_url, CTXSTORE_POLICY=RECALLING) as base:
        yield base


def folded_session(ctx: Client) -> str:
    """A session whose first turns (the invoice among them) are folded into a summary."""
    sid = ctx.start_session("billing", model="openai:gpt-4o").session_id
    ctx.append_node(sid, "user", input="Let us sort out the billing.")  # the anchor: kept
    ctx.append_node(sid, "assistant", output="Sure.")
    ctx.append_node(sid, "user", input=FACT)
    ctx.append_node(sid, "assistant", output="Noted.")
    for n in range(6):
        ctx.append_node(sid, "user", input=f"Question {n} about the weather in Lyon.")
        ctx.append_node(sid, "assistant", output=f"Answer {n}: mild.")
    covered = ctx.compact(sid).covered
    items = {i.item_id: i for i in ctx.context(sid).items}
    assert [i for i in covered if items[i].rendered == FACT], "the fact's turn was folded"
    assert all(items[i].state == "summarized" for i in covered)
    return sid


def test_run_recall_brings_folded_text_back(recalling_server: str) -> None:
    with Client(recalling_server) as ctx:
        sid = folded_session(ctx)
        tools = ctx.render(sid, shape="neutral").request["tools"]
        assert tools == [RECALL_SPEC], "the policy lists the tool"
        text = run_recall(ctx, sid, '{"query": "ACME invoice number", "limit": 3}')
        assert text.startswith("recall: ") and FACT in text
        assert "| user | summarized]" in text and f"{FACT}\n[next] Noted." in text
        shown = run_recall(ctx, sid, {"query": "weather Lyon mild", "limit": 20})
        assert "| full]" not in shown and "Question 5" not in shown  # the tail is in view
        assert run_recall(ctx, sid, {"query": ""}).startswith("error: ")


def _call(arguments: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id="fc_r1", call_id="call_r1", name="recall",
                                    arguments=arguments, type="function_call",
                                    status="completed")  # fmt: skip


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_r1", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )  # fmt: skip


class Recalling(Model):
    """Calls ``recall``, then answers with the line the tool's output gave it."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []
        self.tools: list[Any] = []

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any, *,
                           previous_response_id: Any, conversation_id: Any,
                           prompt: Any) -> ModelResponse:  # fmt: skip
        self.inputs.append(copy.deepcopy(input))
        self.tools.append(tools)
        if len(self.inputs) == 1:
            return ModelResponse(output=[_call('{"query": "ACME invoice"}')], usage=Usage(),
                                 response_id=None)  # fmt: skip
        output = next(i["output"] for i in input if i.get("type") == "function_call_output")
        found = next(line for line in output.splitlines() if "INV-" in line)
        return ModelResponse(output=[_message(found)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def test_an_agents_sdk_agent_calls_recall_and_the_call_is_a_tool_node(
    recalling_server: str,
) -> None:
    with Client(recalling_server) as sync:
        sid = folded_session(sync)

    async def run() -> tuple[Recalling, Any]:
        async with AsyncClient(recalling_server) as ctx:
            session = CtxStoreSession(sid, ctx)
            tool = session.recall_tool()
            assert isinstance(tool, FunctionTool) and tool.name == "recall"
            assert tool.params_json_schema == RECALL_SPEC["input_schema"]
            model = Recalling()
            agent = Agent(name="billing", instructions="Answer from the record.", model=model,
                          tools=[tool])  # fmt: skip
            result = await Runner.run(agent, "What was the ACME invoice number?", session=session)
            return model, result.final_output

    model, answer = asyncio.run(run())
    assert answer == FACT
    assert [t.name for t in model.tools[0]] == ["recall"]
    with Client(recalling_server) as ctx:
        nodes = ctx.nodes(sid).nodes
        calls = [n for n in nodes if n.role == "tool" and n.name == "recall"]
        assert calls and calls[-1].call_id == "call_r1"
        assert calls[-1].input == {"query": "ACME invoice"} and FACT in calls[-1].output
        context = [i for i in ctx.context(sid).items if i.role == "tool"]
        assert [(i.name, i.has_result) for i in context] == [("recall", True)]
        assert FACT in context[0].rendered
        request = ctx.render(sid, shape="openai").request
        called = [c["function"]["name"] for m in request["messages"]
                  for c in m.get("tool_calls") or []]  # fmt: skip
        assert called == ["recall"]
        assert [t["function"]["name"] for t in request["tools"]] == ["recall"]


class RecallingChat(BaseChatModel):
    """LangChain: calls ``recall``, then answers with the line its result gave."""

    bound: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "recalling"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound.extend(t.name for t in tools)
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            # one hit is enough: the question and this pending call are in the context, so
            # the tool's hidden-only recall does not spend its hits on them
            call = {"name": "recall", "args": {"query": "ACME invoice", "limit": 1},
                    "id": "call_lc1", "type": "tool_call"}  # fmt: skip
            answer = AIMessage(content="", tool_calls=[call])
        else:
            answer = AIMessage(
                content=next(x for x in results[-1].text.splitlines() if "INV-" in x)
            )
        return ChatResult(generations=[ChatGeneration(message=answer)])


def test_the_langchain_middleware_registers_recall(recalling_server: str) -> None:
    with Client(recalling_server) as ctx:
        sid = folded_session(ctx)
        assert CtxStoreMiddleware.open(ctx, sid).tools == []  # off unless asked for
        memory = CtxStoreMiddleware.open(ctx, sid, recall=True)
        assert [t.name for t in memory.tools] == ["recall"]
        model = RecallingChat()
        agent = create_agent(model, [], system_prompt="Answer from the record.",
                             middleware=[memory])  # fmt: skip
        result = agent.invoke({"messages": [("user", "What was the ACME invoice number?")]})
        assert result["messages"][-1].text == FACT
        assert set(model.bound) == {"recall"}  # bound at each call
        calls = [n for n in ctx.nodes(sid).nodes if n.role == "tool" and n.name == "recall"]
        assert calls and calls[-1].input == {"query": "ACME invoice", "limit": 1}
        assert FACT in calls[-1].output
