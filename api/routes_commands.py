"""Command routes: parse the body, run ONE runtime command, serialise.

Every response is ``{"session_id", "version", ...result}``, plus
``follow_up`` naming any work after the stored command that failed (the
command itself is stored: ``service.outcome``).  Refusals come from the
domain (``DomainError``) and are turned into JSON by api.errors; nothing
here decides anything about sessions.  Every route takes an
``Idempotency-Key`` (``api.idempotency``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from api import responses as r
from api import schemas as s
from api.auth import tenant_of
from api.body_parsing import parse_body
from api.idempotency import idempotent
from api.observe import mark_replayed
from api.openapi import Endpoint
from domain import commands as c
from domain.catalogue import window_warnings
from domain.session_context import COMPACTION_SETTINGS
from service.runtime import Runtime


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def _execute(request: Request, command: c.Command) -> Any:
    """``runtime.run`` in a worker thread: every runtime call blocks on SQL.

    The caller's tenant goes with every command (``api.auth``), whatever the
    route built.
    """
    command = replace(command, tenant=tenant_of(request))  # type: ignore[call-arg]
    pending = getattr(request.state, "idempotency", None)
    done = await run_in_threadpool(_runtime(request).run, command, idempotency=pending)
    if done.replayed:
        mark_replayed(request.scope)
    request.state.follow_up = done.follow_up
    return done.result


def _reply(request: Request, http_status: int, session_id: Any, version: Any, /,
           **result: Any) -> JSONResponse:  # fmt: skip
    body = {"session_id": str(session_id), "version": version, **result}
    follow_up = getattr(request.state, "follow_up", None)
    if follow_up:
        body["follow_up"] = follow_up
    return JSONResponse(body, http_status)


def _args(body: BaseModel, *drop: str) -> dict[str, Any]:
    """The body's fields as keyword arguments; unset optionals are left to the defaults."""
    return body.model_dump(exclude_none=True, exclude=set(drop))


async def start_session(request: Request) -> Response:
    body = await parse_body(request, s.StartSession)
    session_id, version = await _execute(request, c.StartSession(**_args(body)))
    return _reply(
        request,
        201,
        session_id,
        version,
        warnings=_window_warnings(request, body.model, body.context_window),
    )


async def append_node(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.AppendNode)
    node_id, version = await _execute(request, c.AppendNode.build(session_id=sid, **_args(body)))
    return _reply(request, 201, sid, version, node_id=node_id)


async def append_batch(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.AppendBatch)
    nodes = [node.model_dump(exclude_none=True) for node in body.nodes]
    node_ids, version = await _execute(request, c.AppendNodes(session_id=sid, nodes=nodes,
                                                      **_args(body, "nodes")))  # fmt: skip
    return _reply(request, 201, sid, version, node_ids=node_ids)


async def add_sibling(request: Request, kind: str) -> Response:
    sid, nid = request.path_params["sid"], request.path_params["nid"]
    body = await parse_body(request, s.AddSibling)
    command = c.AddSibling.build(session_id=sid, of=nid, kind=kind, **_args(body))
    node_id, version = await _execute(request, command)
    return _reply(request, 201, sid, version, node_id=node_id, sibling_of=nid, kind=kind)


async def retry(request: Request) -> Response:
    return await add_sibling(request, "retry")


async def edit(request: Request) -> Response:
    return await add_sibling(request, "edit")


async def checkout(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.Checkout)
    head, version = await _execute(request, c.Checkout(session_id=sid, **_args(body)))
    return _reply(request, 200, sid, version, head=head)


async def branch(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.Branch)
    new_id, version = await _execute(request, c.Branch(source_session=sid, **_args(body)))
    return _reply(request, 201, new_id, version,
                  branched_from={"session_id": sid, "node_id": body.node_id})  # fmt: skip


async def pin(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.NodeRef)
    _, version = await _execute(request, c.Pin(session_id=sid, **_args(body)))
    return _reply(request, 200, sid, version, node_id=body.node_id, pinned=True)


async def unpin(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.NodeRef)
    _, version = await _execute(request, c.Unpin(session_id=sid, **_args(body)))
    return _reply(request, 200, sid, version, node_id=body.node_id, pinned=False)


async def attach(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.Attach)
    node_id, version = await _execute(request, c.Attach(session_id=sid, **_args(body)))
    return _reply(request, 201, sid, version, node_id=node_id)


async def merge(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.Merge)
    node_id, version = await _execute(request, c.Merge(session_id=sid, **_args(body)))
    return _reply(request, 201, sid, version, node_id=node_id)


async def usage(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.Usage)
    total, version = await _execute(request, c.MeasureUsage.build(session_id=sid, **_args(body)))
    return _reply(request, 201, sid, version, request_id=body.request_id, total_used=total)


async def start_run(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.StartRun)
    run_id, version = await _execute(request, c.StartRun(session_id=sid, **_args(body)))
    return _reply(request, 201, sid, version, run_id=run_id)


async def finish_run(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.FinishRun)
    _, version = await _execute(request, c.FinishRun(session_id=sid, **_args(body)))
    return _reply(request, 200, sid, version, status=body.status)


async def switch_model(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.SwitchModel)
    _, version = await _execute(request, c.SwitchModel(session_id=sid, **_args(body)))
    window = body.context_window or _runtime(request).models.get(body.model)
    return _reply(
        request,
        200,
        sid,
        version,
        model=body.model,
        context_window=window,
        warnings=_window_warnings(request, body.model, body.context_window),
    )


def _window_warnings(request: Request, model: str, window: int | None) -> list[str]:
    """The window a session on ``model`` gets, named when it is a guess."""
    return window_warnings(model, window or _runtime(request).models.get(model))


async def configure_compaction(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.ConfigureCompaction)
    only = tuple(sorted(body.model_fields_set & set(COMPACTION_SETTINGS)))
    settings, version = await _execute(request, c.ConfigureCompaction(
        session_id=sid, **body.model_dump(exclude={"expected_version", "at"}), only=only,
        expected_version=body.expected_version, at=body.at))  # fmt: skip
    if settings is None:  # a replay of an answer stored before the settings were returned
        settings = body.model_dump(include=set(COMPACTION_SETTINGS))
    return _reply(request, 200, sid, version, **settings)


async def declare_tools(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.DeclareTools)
    tools = [t.model_dump(exclude_none=True) for t in body.tools]
    _, version = await _execute(request, c.DeclareTools(session_id=sid, tools=tools,
                                                  expected_version=body.expected_version,
                                                  at=body.at))  # fmt: skip
    return _reply(request, 200, sid, version, tools=tools)


async def compact(request: Request) -> Response:
    sid = request.path_params["sid"]
    body = await parse_body(request, s.Compact)
    done = await run_in_threadpool(_runtime(request).compact_reporting, sid,
                                   idempotency=getattr(request.state, "idempotency", None),
                                   tenant=tenant_of(request),
                                   **_args(body))  # fmt: skip
    if done.replayed:
        mark_replayed(request.scope)
    request.state.follow_up = done.follow_up
    result = dict(done.result)
    version = result.pop("version", None)
    result.pop("session_id", None)
    return _reply(request, 201, sid, version, **result)


S = "/sessions/{sid}"
STALE = (409,)
ENDPOINTS = [
    Endpoint("POST", "/sessions", start_session, "Start a session", s.StartSession, status=201,
             response=r.SessionCreated),
    Endpoint("POST", f"{S}/nodes", append_node, "Append a node (HEAD moves to it)", s.AppendNode,
             status=201, errors=STALE, response=r.NodeAdded),
    Endpoint("POST", f"{S}/nodes/batch", append_batch,
             "Append several nodes in one atomic command (a turn and its tool calls)",
             s.AppendBatch, status=201, errors=STALE, response=r.BatchAppended),
    Endpoint("POST", f"{S}/nodes/{{nid}}/retry", retry,
             "Retry a node: a new sample of the same prompt, recorded as a sibling version "
             "of kind retry (its content may differ)", s.AddSibling,
             status=201, errors=STALE, response=r.VersionAdded),
    Endpoint("POST", f"{S}/nodes/{{nid}}/edit", edit,
             "Edit a node: a sibling version of kind edit", s.AddSibling,
             status=201, errors=STALE, response=r.VersionAdded),
    Endpoint("POST", f"{S}/checkout", checkout, "Move HEAD (display only)", s.Checkout,
             errors=STALE, response=r.CheckedOut),
    Endpoint("POST", f"{S}/branch", branch, "New session from this one's chain up to a node",
             s.Branch, status=201, response=r.Branched),
    Endpoint("POST", f"{S}/pin", pin, "Pin a node (never aged, cleared or folded)", s.NodeRef,
             errors=STALE, response=r.PinChanged),
    Endpoint("POST", f"{S}/unpin", unpin, "Unpin a node", s.NodeRef, errors=STALE,
             response=r.PinChanged),
    Endpoint("POST", f"{S}/attach", attach, "Stage another session's context after HEAD",
             s.Attach, status=201, errors=STALE, response=r.NodeAdded),
    Endpoint("POST", f"{S}/merge", merge, "Merge peer heads into HEAD", s.Merge, status=201,
             errors=STALE, response=r.NodeAdded),
    Endpoint("POST", f"{S}/usage", usage, "Record what the provider measured for a request",
             s.Usage, status=201, errors=STALE, response=r.UsageRecorded),
    Endpoint("POST", f"{S}/runs/start", start_run, "Start an agent run", s.StartRun,
             status=201, errors=STALE, response=r.RunStarted),
    Endpoint("POST", f"{S}/runs/finish", finish_run, "Finish the active agent run",
             s.FinishRun, errors=STALE, response=r.RunFinished),
    Endpoint("POST", f"{S}/model", switch_model, "Switch the session's model", s.SwitchModel,
             errors=STALE, response=r.ModelChanged),
    Endpoint("POST", f"{S}/tools", declare_tools,
             "Declare the tools requests offer (name, description, JSON schema); replaces the "
             "last declaration", s.DeclareTools, errors=STALE, response=r.ToolsDeclared),
    Endpoint("POST", f"{S}/compaction", configure_compaction,
             "Set this session's summarizer instructions and model (recorded as an event)",
             s.ConfigureCompaction, errors=STALE, response=r.CompactionSet),
    Endpoint("POST", f"{S}/compact", compact, "Summarize the run the head commit asks for",
             s.Compact, status=201, errors=(409, 502), response=r.Compacted),
]  # fmt: skip
ENDPOINTS = [replace(ep, handler=idempotent(ep.handler)) for ep in ENDPOINTS]
