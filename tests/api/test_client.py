"""The Python client (``api.client``): every route, typed answers, errors, headers, async."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from api import context_responses as cr
from api import responses as m
from api.client import AsyncClient, Client, Conflict, InvalidRequest, NotFound, event_data
from api.client import commands as c
from api.client import node_commands as nc
from api.client import queries as q
from tests.api.conftest import LOCAL


@pytest.fixture
def sent(client: TestClient) -> list[httpx.Request]:
    """Every request the client sends, as it went over the wire."""
    seen: list[httpx.Request] = []
    client.event_hooks["request"].append(seen.append)
    return seen


def test_every_route_through_the_client(client: TestClient, sent: list[httpx.Request]) -> None:
    ctx = Client(http=client, api_key="k-123")
    sid = ctx.start_session("client", "openai:gpt-4o", idempotency_key="start-1").session_id
    assert sent[-1].headers["authorization"] == "Bearer k-123"
    assert sent[-1].headers["idempotency-key"] == "start-1"
    u = ctx.append_node(sid, "user", input="Read x.py", node_id="cu 1?#").node_id
    assert u == "cu 1?#" and ctx.get_session(sid).head == u  # quoted as one path segment
    batch = ctx.append_nodes(sid, [
        {"role": "assistant", "output": "reading", "node_id": "ca1"},
        {"role": "tool", "name": "read_file", "input": {"path": "x.py"}, "output": "x = 1",
         "node_id": "ct1"},
    ])  # fmt: skip
    assert isinstance(batch, m.BatchAppended) and batch.node_ids == ["ca1", "ct1"]
    assert "idempotency-key" not in sent[-1].headers
    retry = ctx.retry(sid, "ca1", output="reading again", node_id="ca1b")
    assert (retry.kind, retry.sibling_of) == ("retry", "ca1")
    assert ctx.edit(sid, "ca1", output="other").kind == "edit"
    assert ctx.checkout(sid, "ct1", expected_version=retry.version + 1).head == "ct1"
    assert ctx.pin(sid, u).pinned and not ctx.unpin(sid, u).pinned
    other = ctx.start_session("other").session_id
    ctx.append_node(other, "user", input="side", node_id="co1")
    assert ctx.attach(sid, other).node_id
    ctx.append_node(sid, "assistant", output="after attach", node_id="ca2")
    assert ctx.merge(sid, [{"node_id": "ca1b"}]).node_id
    usage = ctx.record_usage(
        sid,
        "r1",
        usage={
            "prompt_tokens": 90,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 64},
        },
    )
    assert usage.total_used == 90 and ctx.occupancy(sid).total_used == 90
    assert [(h.node_id, h.session_id) for h in ctx.recall(sid, "side").hits] == [("co1", other)]
    assert ctx.start_run(sid, run_id="run-1").run_id == "run-1"
    assert ctx.finish_run(sid, status="failed").status == "failed"
    assert ctx.switch_model(sid, "local:tiny", context_window=4096).context_window == 4096
    branch = ctx.branch(sid, "ca1", title="alt")
    assert branch.branched_from.node_id == "ca1"
    head = ctx.context(sid)
    assert isinstance(head, cr.Commit) and ctx.commit(sid, head.id) == head
    rendered = ctx.render(sid, shape="anthropic")
    assert rendered.commit_id == head.id and rendered.version == ctx.get_session(sid).version
    assert [n.node_id for n in ctx.nodes(sid, head="ct1").nodes] == [u, "ca1", "ct1"]
    assert ctx.dag(sid).head == ctx.get_session(sid).head
    assert ctx.timeline(sid).commits and ctx.explain(sid, "ct1").node_id == "ct1"
    assert ctx.budget(sid).window == 4096 and ctx.health().status == "ok"
    assert "/sessions/{sid}/nodes/batch" in ctx.openapi().paths
    assert {s.session_id for s in ctx.iter_sessions(page=1)} == {sid, other, branch.session_id}
    events = list(ctx.iter_events(sid, page=3))
    assert [e.seq for e in events] == list(range(1, ctx.get_session(sid).version + 1))
    frames = list(ctx.stream(sid, once=True))
    assert [f.event for f in frames] == ["occupancy", "timeline"]
    assert event_data(frames[0])["session_id"] == sid
    with pytest.raises(InvalidRequest) as bad:
        ctx.compact(sid, expected_version="x")  # type: ignore[arg-type]
    assert bad.value.code == "invalid_request"


def test_refusals_raise_with_the_apis_code(client: TestClient) -> None:
    ctx = Client(http=client)
    sid = ctx.start_session().session_id
    with pytest.raises(NotFound) as missing:
        ctx.get_session("00000000-0000-0000-0000-000000000009")
    assert missing.value.code == "session_not_found" and missing.value.status == 404
    ctx.append_node(sid, "user", input="hi", node_id="ru1")
    with pytest.raises(Conflict) as stale:
        ctx.append_node(sid, "assistant", output="x", expected_version=1)
    assert stale.value.code == "stale_version" and stale.value.details["actual"] == 2
    with pytest.raises(InvalidRequest) as edge:
        ctx.append_node(sid, "tool", caller="ru1")
    assert edge.value.code == "invalid_edge"
    with pytest.raises(NotFound):
        list(ctx.stream("00000000-0000-0000-0000-000000000009", once=True))


def test_the_async_client_has_the_same_methods(runtime: Any) -> None:
    sync = {n: getattr(Client, n) for n in dir(Client) if not n.startswith("_")}
    aio = {n: getattr(AsyncClient, n) for n in dir(AsyncClient) if not n.startswith("_")}
    assert set(sync) - {"close"} == set(aio) - {"aclose"}
    for module in (c, nc):
        for fn in module.__dict__.values():
            if (
                inspect.isfunction(fn)
                and not fn.__name__.startswith("_")
                and fn.__module__ == module.__name__
            ):
                assert sync[fn.__name__].__wrapped__ is fn is aio[fn.__name__].__wrapped__
    for fn in (q.get_session, q.render, q.events):
        assert sync[fn.__name__].__wrapped__ is fn is aio[fn.__name__].__wrapped__

    from api.app import create_app

    async def drive() -> None:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as http:
            ctx = AsyncClient(http=http, api_key="k")
            sid = (await ctx.start_session("async")).session_id
            await ctx.append_nodes(sid, [{"role": "user", "input": "hi"},
                                         {"role": "assistant", "output": "hello"}])  # fmt: skip
            assert (await ctx.render(sid, shape="openai")).request["messages"]
            assert [e.seq async for e in ctx.iter_events(sid, page=1)] == [1, 2, 3]
            assert [s.session_id async for s in ctx.iter_sessions()] == [sid]
            frames = [f.event async for f in ctx.stream(sid, once=True)]
            assert frames == ["occupancy", "timeline"]
            with pytest.raises(NotFound):
                await ctx.checkout(sid, "nope")

    asyncio.run(drive())


def test_the_client_posts_the_command_objects_the_routes_build(
    client: TestClient, sent: list[httpx.Request]
) -> None:
    """A builder and ``Client.run`` send the same request for the same ``domain.commands``
    object; the route builds that object back from the body (issue 15)."""
    from api.client.command_routes import request_for
    from domain import commands
    from domain.session_context import COMPACTION_SETTINGS

    ctx = Client(http=client)
    sid = ctx.run(commands.StartSession(title="typed", model="openai:gpt-4o")).session_id
    pin = commands.Pin(session_id=sid, node_id="u1")
    node = commands.AppendNode.build(session_id=sid, role="user", input="hi", node_id="u1")
    assert nc.append_node(sid, "user", input="hi", node_id="u1") == request_for(node)
    assert c.pin(sid, "u1") == request_for(pin)
    # compaction settings: one left out keeps its value, so ``None`` is sent as null
    everything = commands.ConfigureCompaction(session_id=sid)
    assert request_for(everything).json == dict.fromkeys(COMPACTION_SETTINGS)
    assert c.configure_compaction(sid, instructions=None, summarizer_model=None,
                                  recall_tool=None) == request_for(everything)  # fmt: skip
    one = commands.ConfigureCompaction(session_id=sid, recall_tool=True, only=("recall_tool",))
    assert c.configure_compaction(sid, recall_tool=True) == request_for(one)
    assert ctx.run(node).node_id == "u1"
    assert ctx.run(pin, idempotency_key="pin-1").pinned
    assert sent[-1].headers["idempotency-key"] == "pin-1"
    assert ctx.get_session(sid).pinned == ["u1"]


def test_a_time_given_as_text_sends_what_the_datetime_does() -> None:
    from datetime import datetime, timedelta, timezone

    when = datetime(2026, 12, 5, 12, 0, tzinfo=timezone(timedelta(hours=1)))
    assert c.start_session("t", at="2026-12-05T12:00:00+01:00") == c.start_session("t", at=when)
    utc = nc.append_node("s", "user", at="2026-12-05T11:00:00Z")
    assert utc.json is not None and utc.json["at"] == "2026-12-05T11:00:00+00:00"
    with pytest.raises(ValueError):
        c.pin("s", "u1", at="yesterday")


def test_the_routes_added_to_the_client_have_named_methods(runtime: Any) -> None:
    """POST /tools, POST /compaction, GET /tools, transitions, /models, the erasure routes."""
    from api.app import create_app
    from service.api_keys import KeyStore

    keys = KeyStore(runtime.store.engine)
    admin = keys.create("acme", "admin")[1]
    with TestClient(create_app(runtime), base_url=LOCAL) as http:
        ctx = Client(http=http, api_key=admin)
        sid = ctx.start_session("tools").session_id
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        spec = {"name": "read_file", "description": "Read a file", "input_schema": schema}
        assert [t["name"] for t in ctx.declare_tools(sid, [spec]).tools] == ["read_file"]
        assert [t["name"] for t in ctx.tools(sid).tools] == ["read_file"]
        set_ = ctx.configure_compaction(sid, instructions="Keep file names.")
        assert set_.instructions == "Keep file names." and set_.summarizer_model is None
        ctx.append_node(sid, "user", input="hi")
        head = ctx.context(sid).id
        assert ctx.commit_transitions(sid, head).commit_id == head
        models = ctx.models()
        assert models.default_window > 0 and any(m.model == "openai:gpt-4o" for m in models.models)
        erased = ctx.erase_session(sid)
        assert erased.session_id == sid and ctx.erasures().erasures[-1].session_id == sid
        with pytest.raises(NotFound):
            ctx.get_session(sid)
        other = ctx.start_session("other").session_id
        with pytest.raises(InvalidRequest) as refused:
            ctx.erase_tenant("globex")
        assert refused.value.code == "tenant_not_confirmed"
        assert [r.session_id for r in ctx.erase_tenant("acme").erasures] == [other]


CLIENT_METHODS = {
    ("POST", "/sessions"): "start_session",
    ("POST", "/sessions/{sid}/nodes"): "append_node",
    ("POST", "/sessions/{sid}/nodes/batch"): "append_nodes",
    ("POST", "/sessions/{sid}/nodes/{nid}/retry"): "retry",
    ("POST", "/sessions/{sid}/nodes/{nid}/edit"): "edit",
    ("POST", "/sessions/{sid}/checkout"): "checkout",
    ("POST", "/sessions/{sid}/branch"): "branch",
    ("POST", "/sessions/{sid}/pin"): "pin",
    ("POST", "/sessions/{sid}/unpin"): "unpin",
    ("POST", "/sessions/{sid}/attach"): "attach",
    ("POST", "/sessions/{sid}/merge"): "merge",
    ("POST", "/sessions/{sid}/usage"): "record_usage",
    ("POST", "/sessions/{sid}/runs/start"): "start_run",
    ("POST", "/sessions/{sid}/runs/finish"): "finish_run",
    ("POST", "/sessions/{sid}/model"): "switch_model",
    ("POST", "/sessions/{sid}/tools"): "declare_tools",
    ("POST", "/sessions/{sid}/compaction"): "configure_compaction",
    ("POST", "/sessions/{sid}/compact"): "compact",
    ("GET", "/sessions"): "list_sessions",
    ("GET", "/sessions/{sid}"): "get_session",
    ("GET", "/sessions/{sid}/nodes"): "nodes",
    ("GET", "/sessions/{sid}/events"): "events",
    ("GET", "/sessions/{sid}/dag"): "dag",
    ("GET", "/sessions/{sid}/tools"): "tools",
    ("GET", "/sessions/{sid}/context"): "context",
    ("GET", "/sessions/{sid}/commits/{cid}"): "commit",
    ("GET", "/sessions/{sid}/commits/{cid}/transitions"): "commit_transitions",
    ("GET", "/sessions/{sid}/render"): "render",
    ("GET", "/sessions/{sid}/timeline"): "timeline",
    ("GET", "/sessions/{sid}/explain/{nid}"): "explain",
    ("GET", "/sessions/{sid}/recall"): "recall",
    ("GET", "/sessions/{sid}/occupancy"): "occupancy",
    ("GET", "/sessions/{sid}/budget"): "budget",
    ("GET", "/sessions/{sid}/stream"): "stream",
    ("GET", "/models"): "models",
    ("GET", "/health"): "health",
    ("GET", "/ready"): "ready",
    ("GET", "/openapi.json"): "openapi",
    ("DELETE", "/sessions/{sid}"): "erase_session",
    ("DELETE", "/tenant"): "erase_tenant",
    ("GET", "/erasures"): "erasures",
}


def test_every_route_has_a_named_method_blocking_and_asyncio() -> None:
    """A route added to the server without its client method fails here."""
    from api.app import ENDPOINTS

    assert {(ep.method, ep.path) for ep in ENDPOINTS} == set(CLIENT_METHODS)
    for name in CLIENT_METHODS.values():
        assert callable(getattr(Client, name)) and callable(getattr(AsyncClient, name)), name
