"""Every query route as a request builder (``api.client.request``)."""

from __future__ import annotations

from typing import Literal

from api import responses as m
from api.client.request import Request, _get, _s, _seg


def list_sessions(*, limit: int | None = None, after: str | None = None) -> Request[m.SessionPage]:
    """One page; pass the answer's ``next`` as ``after`` for the following one."""
    return _get("/sessions", m.SessionPage, limit=limit, after=after)


def get_session(session_id: str) -> Request[m.SessionInfo]:
    return _get(_s(session_id), m.SessionInfo)


def nodes(session_id: str, *, head: str | None = None) -> Request[m.BranchNodes]:
    """The nodes of the branch ending at ``head`` (default HEAD), oldest first, with content."""
    return _get(_s(session_id, "nodes"), m.BranchNodes, head=head)


def events(session_id: str, *, after: int = 0, limit: int | None = None) -> Request[m.EventPage]:
    return _get(_s(session_id, "events"), m.EventPage, after=after, limit=limit)


def dag(session_id: str) -> Request[m.Dag]:
    return _get(_s(session_id, "dag"), m.Dag)


def context(session_id: str) -> Request[m.Commit]:
    return _get(_s(session_id, "context"), m.Commit)


def commit(session_id: str, commit_id: str) -> Request[m.Commit]:
    return _get(_s(session_id, "commits", _seg(commit_id)), m.Commit)


def render(
    session_id: str,
    *,
    shape: Literal["neutral", "openai", "anthropic"] = "neutral",
    commit: str | None = None,
) -> Request[m.Rendered]:
    return _get(_s(session_id, "render"), m.Rendered, shape=shape, commit=commit)


def timeline(session_id: str) -> Request[m.Timeline]:
    return _get(_s(session_id, "timeline"), m.Timeline)


def explain(session_id: str, node_id: str) -> Request[m.Explanation]:
    return _get(_s(session_id, "explain", _seg(node_id)), m.Explanation)


def occupancy(session_id: str) -> Request[m.Occupancy]:
    return _get(_s(session_id, "occupancy"), m.Occupancy)


def budget(session_id: str) -> Request[m.BudgetSplit]:
    return _get(_s(session_id, "budget"), m.BudgetSplit)


def health() -> Request[m.Health]:
    return _get("/health", m.Health)


def openapi() -> Request[m.OpenAPIDocument]:
    return _get("/openapi.json", m.OpenAPIDocument)


def stream(
    session_id: str, *, once: bool = False, interval: float | None = None
) -> Request[m.StreamEvent]:
    """Server-sent events: occupancy and timeline, then their changes."""
    return _get(
        _s(session_id, "stream"), m.StreamEvent, once="true" if once else None, interval=interval
    )
