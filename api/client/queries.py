"""Every query route as a request builder (``api.client.request``)."""

from __future__ import annotations

from api import context_responses as cr
from api import responses as m
from api import session_responses as sr
from api.client.request import Request, _get, _s, _seg


def list_sessions(*, limit: int | None = None, after: str | None = None) -> Request[sr.SessionPage]:
    """One page; pass the answer's ``next`` as ``after`` for the following one."""
    return _get("/sessions", sr.SessionPage, limit=limit, after=after)


def get_session(session_id: str) -> Request[sr.SessionInfo]:
    return _get(_s(session_id), sr.SessionInfo)


def nodes(session_id: str, *, head: str | None = None) -> Request[sr.BranchNodes]:
    """The nodes of the branch ending at ``head`` (default HEAD), oldest first, with content."""
    return _get(_s(session_id, "nodes"), sr.BranchNodes, head=head)


def events(session_id: str, *, after: int = 0, limit: int | None = None) -> Request[sr.EventPage]:
    return _get(_s(session_id, "events"), sr.EventPage, after=after, limit=limit)


def dag(session_id: str) -> Request[sr.Dag]:
    return _get(_s(session_id, "dag"), sr.Dag)


def context(session_id: str) -> Request[cr.Commit]:
    return _get(_s(session_id, "context"), cr.Commit)


def commit(session_id: str, commit_id: str) -> Request[cr.Commit]:
    return _get(_s(session_id, "commits", _seg(commit_id)), cr.Commit)


def render(
    session_id: str,
    *,
    shape: cr.Shape = "neutral",
    commit: str | None = None,
) -> Request[cr.Rendered]:
    return _get(_s(session_id, "render"), cr.Rendered, shape=shape, commit=commit)


def timeline(session_id: str) -> Request[cr.Timeline]:
    return _get(_s(session_id, "timeline"), cr.Timeline)


def explain(session_id: str, node_id: str) -> Request[cr.Explanation]:
    return _get(_s(session_id, "explain", _seg(node_id)), cr.Explanation)


def occupancy(session_id: str) -> Request[cr.Occupancy]:
    return _get(_s(session_id, "occupancy"), cr.Occupancy)


def budget(session_id: str) -> Request[cr.BudgetSplit]:
    return _get(_s(session_id, "budget"), cr.BudgetSplit)


def health() -> Request[m.Health]:
    return _get("/health", m.Health)


def openapi() -> Request[m.OpenAPIDocument]:
    return _get("/openapi.json", m.OpenAPIDocument)


def stream(
    session_id: str, *, once: bool = False, interval: float | None = None
) -> Request[cr.StreamEvent]:
    """Server-sent events: occupancy and timeline, then their changes."""
    return _get(
        _s(session_id, "stream"), cr.StreamEvent, once="true" if once else None, interval=interval
    )
