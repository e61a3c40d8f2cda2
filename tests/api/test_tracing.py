"""Traces: an append's and a render's span tree, inside the caller's own trace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from api.client import Client
from telemetry import tracing
from tests.api.test_commands import World

sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, Any]]:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    try:
        yield exporter, provider
    finally:
        tracing.use(None)


def tree(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {s.name: s for s in exporter.get_finished_spans()}


def child_of(span: Any, parent: Any) -> bool:
    return span.parent is not None and span.parent.span_id == parent.context.span_id


def test_an_append_and_a_render_are_span_trees_in_the_callers_trace(
    client: TestClient, spans: tuple[InMemorySpanExporter, Any]
) -> None:
    exporter, _ = spans
    sid = client.post("/sessions", json={"title": "t"}).json()["session_id"]
    exporter.clear()
    caller = {"traceparent": f"00-{TRACE}-{PARENT}-01"}
    r = client.post(f"/sessions/{sid}/nodes", json={"role": "user", "output": "hi"},
                    headers=caller)  # fmt: skip
    assert r.status_code == 201
    found = tree(exporter)
    request = found["POST /sessions/{sid}/nodes"]
    assert f"{request.context.trace_id:032x}" == TRACE
    assert f"{request.parent.span_id:016x}" == PARENT and request.parent.is_remote
    assert request.attributes["http.route"] == "/sessions/{sid}/nodes"
    assert request.attributes["http.response.status_code"] == 201
    command = found["ctxstore.command"]
    assert child_of(command, request) and command.attributes["ctxstore.command"] == "append_node"
    assert child_of(found["ctxstore.event_write"], command)
    assert child_of(found["ctxstore.catch_up"], command)
    assert child_of(found["ctxstore.rule_pipeline"], found["ctxstore.catch_up"])
    assert all(f"{s.context.trace_id:032x}" == TRACE for s in found.values())
    assert sid not in str([dict(s.attributes or {}) for s in found.values()])

    exporter.clear()
    assert client.get(f"/sessions/{sid}/render", headers=caller).status_code == 200
    found = tree(exporter)
    request = found["GET /sessions/{sid}/render"]
    render = found["ctxstore.render"]
    assert child_of(render, request) and f"{render.context.trace_id:032x}" == TRACE
    assert render.attributes["ctxstore.render.tokens"] > 0
    assert 0 < render.attributes["ctxstore.render.window_share"] < 1


def test_the_python_client_carries_the_agents_trace(
    client: TestClient, spans: tuple[InMemorySpanExporter, Any]
) -> None:
    exporter, provider = spans
    ctx = Client(http=client)
    with provider.get_tracer("agent").start_as_current_span("agent turn") as turn:
        sid = ctx.start_session("traced").session_id
        ctx.append_node(sid, "user", output="hello")
    found = [s for s in exporter.get_finished_spans() if s.name.startswith("POST ")]
    assert len(found) == 2
    for span in found:
        assert span.context.trace_id == turn.get_span_context().trace_id
        assert span.parent.span_id == turn.get_span_context().span_id


def test_a_summarizer_call_carries_the_gen_ai_usage(
    client: TestClient, spans: tuple[InMemorySpanExporter, Any]
) -> None:
    exporter, _ = spans
    world = World(client)
    exporter.clear()
    assert client.post(f"/sessions/{world.sid}/compact", json={}).status_code == 201
    call = tree(exporter)["ctxstore.summarize"]
    assert call.attributes["ctxstore.summarizer"] == "extractive"
    assert call.attributes["gen_ai.usage.input_tokens"] > 0
    assert call.attributes["gen_ai.usage.output_tokens"] > 0
    assert "gen_ai.operation.name" not in call.attributes  # no model was called


def test_a_render_span_says_how_many_leading_messages_repeat_the_last_render(
    client: TestClient, spans: tuple[InMemorySpanExporter, Any]
) -> None:
    exporter, _ = spans
    sid = client.post("/sessions", json={"title": "t"}).json()["session_id"]
    said = [{"role": "user", "input": "hi"}, {"role": "assistant", "output": "hello"}]
    for node in said:
        assert client.post(f"/sessions/{sid}/nodes", json=node).status_code == 201

    def render() -> Any:
        exporter.clear()
        assert client.get(f"/sessions/{sid}/render?shape=openai").status_code == 200
        return tree(exporter)["ctxstore.render"].attributes

    first = render()
    assert first["ctxstore.render.tokens"] > 0
    assert first["ctxstore.render.prefix_messages"] == 0  # nothing rendered before
    assert first["ctxstore.render.messages"] >= 2
    node = {"role": "user", "input": "and now?"}
    assert client.post(f"/sessions/{sid}/nodes", json=node).status_code == 201
    second = render()  # the earlier messages are sent again, unchanged, then the new one
    assert second["ctxstore.render.messages"] == first["ctxstore.render.messages"] + 1
    assert second["ctxstore.render.prefix_messages"] == first["ctxstore.render.messages"]
