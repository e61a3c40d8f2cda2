"""Query routes: parse the path and query string, call ONE runtime query."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from api import context_responses as cr
from api import query_params as qp
from api import responses as r
from api import session_responses as sr
from api.auth import tenant_of
from api.json_bytes import json_bytes
from api.openapi import Endpoint
from domain.catalogue import CONTEXT_WINDOWS, DEFAULT_WINDOW
from domain.rules.redact import mask_reply
from projections.session_queries import decode_cursor
from service.event_json import event_to_json
from service.runtime import Runtime


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def _query(request: Request, method: str, *args: Any, **kwargs: Any) -> Any:
    """``runtime.<method>`` in a worker thread, for the caller's tenant (``api.auth``).

    With ``redact_secrets`` on, every answer's content is masked on the way
    out (``mask_reply``), whoever asks: the log keeps what was written, and
    only the database's holder reads it raw (``ctxstore export`` with the
    policy off).  A render is masked by the runtime already, and cached; a
    page of sessions is masked without its cursor.
    """
    found = await run_in_threadpool(getattr(_runtime(request), method), *args,
                                    tenant=tenant_of(request), **kwargs)  # fmt: skip
    return found if method in ("rendered", "sessions_page") else await _masked(request, found)


async def _masked(request: Request, found: Any) -> Any:
    if _runtime(request).policy.redact_secrets:
        return await run_in_threadpool(mask_reply, found)
    return found


def _no_query(request: Request) -> None:
    qp.parse_query(request, qp.EmptyQuery)


def _events_page(runtime: Runtime, sid: str, after: int, limit: int,
                 tenant: str) -> list[dict[str, Any]]:  # fmt: skip
    # Serialised in the worker thread too: a page can be a thousand events.
    events = runtime.app.session_events(sid, gt=after, limit=limit + 1, tenant=tenant)
    page = [event_to_json(event) for event in events]
    return mask_reply(page) if runtime.policy.redact_secrets else page


async def events(request: Request) -> Response:
    sid = request.path_params["sid"]
    q = qp.parse_query(request, qp.EventsQuery)
    page = await run_in_threadpool(_events_page, _runtime(request), sid, q.after, q.limit,
                                   tenant_of(request))  # fmt: skip
    has_more = len(page) > q.limit
    page = page[: q.limit]
    last = page[-1]["originator_version"] if page else q.after
    # ``next`` is what to pass as ``after`` for the following page, None once this
    # page reached the end (as on /sessions); ``next_after`` is where a client
    # tailing the feed polls from, whether or not more is there yet.
    return JSONResponse({"session_id": sid, "after": q.after, "events": page,
                         "next": last if has_more else None,
                         "next_after": last, "has_more": has_more})  # fmt: skip


async def sessions(request: Request) -> Response:
    q = qp.parse_query(request, qp.SessionsQuery)
    after = decode_cursor(q.after) if q.after else None
    page, cursor = await _query(request, "sessions_page", q.limit, after)
    return JSONResponse({"sessions": await _masked(request, page), "next": cursor})


async def session(request: Request) -> Response:
    _no_query(request)
    return JSONResponse(await _query(request, "session_info", request.path_params["sid"]))


async def nodes(request: Request) -> Response:
    q = qp.parse_query(request, qp.NodesQuery)
    return JSONResponse(await _query(request, "branch_nodes", request.path_params["sid"], q.head))


async def tools(request: Request) -> Response:
    _no_query(request)
    return JSONResponse(await _query(request, "tools", request.path_params["sid"]))


async def dag(request: Request) -> Response:
    _no_query(request)
    return JSONResponse(await _query(request, "dag", request.path_params["sid"]))


async def context(request: Request) -> Response:
    _no_query(request)
    return JSONResponse(await _query(request, "head_commit", request.path_params["sid"]))


async def commit(request: Request) -> Response:
    _no_query(request)
    sid, cid = request.path_params["sid"], request.path_params["cid"]
    return JSONResponse(await _query(request, "commit", sid, cid))


async def commit_transitions(request: Request) -> Response:
    _no_query(request)
    sid, cid = request.path_params["sid"], request.path_params["cid"]
    return JSONResponse(await _query(request, "commit_transitions", sid, cid))


RENDER_BYTES = 64  # serialised renders kept per app


def _json_bytes(content: Any) -> bytes:
    """Exactly what ``JSONResponse`` would send (``api.json_bytes``)."""
    return json_bytes(content)


async def render(request: Request) -> Response:
    q = qp.parse_query(request, qp.RenderQuery)
    sid = request.path_params["sid"]
    result = await _query(request, "rendered", sid, q.shape, q.commit, q.cache)
    # A 1,000-node request is ~130 kB of JSON, and encoding it is most of the cost
    # of this route.  The runtime hands back the same (immutable) dict while its
    # own cache holds it, so the bytes are reused only for that very object.
    cache: OrderedDict[tuple[str, str, bool], tuple[Any, bytes]] | None = getattr(
        request.app.state, "render_bytes", None
    )
    if cache is None:
        cache = request.app.state.render_bytes = OrderedDict()
    key = (str(result.get("commit_id")), q.shape, q.cache)
    hit = cache.get(key)
    if hit is not None and hit[0] is result:
        cache.move_to_end(key)
        body = hit[1]
    else:
        body = _json_bytes(result)
        cache[key] = (result, body)
        while len(cache) > RENDER_BYTES:
            cache.popitem(last=False)
    return Response(body, media_type="application/json")


async def timeline(request: Request) -> Response:
    _no_query(request)
    sid = request.path_params["sid"]
    return JSONResponse({"session_id": sid, "commits": await _query(request, "timeline", sid)})


async def explain(request: Request) -> Response:
    _no_query(request)
    sid, nid = request.path_params["sid"], request.path_params["nid"]
    return JSONResponse(await _query(request, "explain", sid, nid))


async def recall(request: Request) -> Response:
    q = qp.parse_query(request, qp.RecallQuery)
    # masked by the runtime already: the text only, matched on the original
    found = await run_in_threadpool(_runtime(request).recall, request.path_params["sid"], q.q,
                                    q.limit, q.hidden, tenant=tenant_of(request))  # fmt: skip
    return JSONResponse(found)


async def occupancy(request: Request) -> Response:
    _no_query(request)
    return JSONResponse(await _query(request, "occupancy", request.path_params["sid"]))


async def budget(request: Request) -> Response:
    _no_query(request)
    return JSONResponse(await _query(request, "budget", request.path_params["sid"]))


async def health(request: Request) -> Response:
    # Public (no key needed): the position is a count, no session's data.
    position = await run_in_threadpool(_runtime(request).position)
    body: dict[str, Any] = {"status": "ok", "position": position}
    lane = getattr(request.app.state, "lane", None)
    if lane is not None:
        body["large_body_lane"] = "ready" if await lane.ready() else "starting"
    return JSONResponse(body)


async def models(request: Request) -> Response:
    _no_query(request)
    known = _runtime(request).models
    rows = [
        {"model": m, "window": w, "source": "catalogue"}
        for m, w in sorted(CONTEXT_WINDOWS.items())
        if m not in known
    ]
    rows += [{"model": m, "window": w, "source": "deployment"} for m, w in sorted(known.items())]
    rows.sort(key=lambda row: str(row["model"]))
    return JSONResponse({"models": rows, "default_window": DEFAULT_WINDOW})


S = "/sessions/{sid}"
ENDPOINTS = [
    Endpoint("GET", "/sessions", sessions, "Sessions, oldest first, a page at a time",
             query=qp.SessionsQuery, response=sr.SessionPage),
    Endpoint("GET", S, session, "One session: head, version, model, window and counts",
             response=sr.SessionInfo),
    Endpoint("GET", f"{S}/nodes", nodes, "The nodes of a branch, oldest first, with content",
             query=qp.NodesQuery, response=sr.BranchNodes),
    Endpoint("GET", f"{S}/events", events, "The replay feed, paged by originator version",
             query=qp.EventsQuery, response=sr.EventPage),
    Endpoint("GET", f"{S}/dag", dag, "Every node with its edges and sibling versions",
             response=sr.Dag),
    Endpoint("GET", f"{S}/tools", tools, "The tools the session declared last",
             response=cr.ToolsList),
    Endpoint("GET", f"{S}/context", context, "The head commit: what the model is fed, and why",
             response=cr.Commit),
    Endpoint("GET", f"{S}/commits/{{cid}}", commit, "One context commit", response=cr.Commit),
    Endpoint("GET", f"{S}/commits/{{cid}}/transitions", commit_transitions,
             "The state changes a commit made, each with its rule and measured inputs",
             response=cr.CommitTransitions),
    Endpoint("GET", f"{S}/render", render, "A commit rendered as a provider request",
             query=qp.RenderQuery, response=cr.Rendered),
    Endpoint("GET", f"{S}/timeline", timeline, "Every context commit, oldest first",
             response=cr.Timeline),
    Endpoint("GET", f"{S}/explain/{{nid}}", explain, "Why a node's item is in its state",
             response=cr.Explanation, slashed=("nid",)),
    Endpoint("GET", f"{S}/recall", recall, "Search the original content of every node under "
             "the head, in any state (folded ones too), best first",
             query=qp.RecallQuery, response=cr.Recall),
    Endpoint("GET", f"{S}/occupancy", occupancy, "How full the context window is",
             response=cr.Occupancy),
    Endpoint("GET", f"{S}/budget", budget, "The window's budget and its thresholds",
             response=cr.BudgetSplit),
    Endpoint("GET", "/models", models, "The models whose context window is known, and the "
             "window any other model is assumed to get", response=r.ModelList),
    Endpoint("GET", "/health", health, "Liveness, and the projections' tracking position",
             response=r.Health),
]  # fmt: skip
