"""Every query route as a request builder (``ctxstore_client.request``)."""

from __future__ import annotations

from ctxstore_client import context_responses as cr
from ctxstore_client import erasure_responses as er
from ctxstore_client import responses as m
from ctxstore_client import session_responses as sr
from ctxstore_client.request import Request, _get, _s, _seg


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


def commit_transitions(session_id: str, commit_id: str) -> Request[cr.CommitTransitions]:
    """The state changes a commit made, each with its rule and measured inputs."""
    return _get(_s(session_id, "commits", _seg(commit_id), "transitions"), cr.CommitTransitions)


def tools(session_id: str) -> Request[cr.ToolsList]:
    """The tools the session declared last."""
    return _get(_s(session_id, "tools"), cr.ToolsList)


def render(
    session_id: str,
    *,
    shape: cr.Shape = "neutral",
    commit: str | None = None,
    cache: bool = False,
) -> Request[cr.Rendered]:
    """The commit (default: the head's) as a provider request; ``shape`` is one the
    server lists in /openapi.json (``neutral``, ``openai``, ``anthropic``, ...)."""
    return _get(_s(session_id, "render"), cr.Rendered, shape=shape, commit=commit,
                cache="true" if cache else None)  # fmt: skip


def timeline(session_id: str) -> Request[cr.Timeline]:
    return _get(_s(session_id, "timeline"), cr.Timeline)


def explain(session_id: str, node_id: str) -> Request[cr.Explanation]:
    return _get(_s(session_id, "explain", _seg(node_id)), cr.Explanation)


def recall(session_id: str, q: str, limit: int = 5, hidden: bool = False) -> Request[cr.Recall]:
    """The nodes under the head whose original content best matches ``q`` (words, names,
    paths), whatever their state now: folded, cleared and summarized ones too.  ``hidden``:
    only those the model cannot read in full now (what the recall tool asks for)."""
    return _get(_s(session_id, "recall"), cr.Recall, q=q, limit=limit,
                hidden="true" if hidden else None)  # fmt: skip


def occupancy(session_id: str) -> Request[cr.Occupancy]:
    return _get(_s(session_id, "occupancy"), cr.Occupancy)


def budget(session_id: str) -> Request[cr.BudgetSplit]:
    return _get(_s(session_id, "budget"), cr.BudgetSplit)


def models() -> Request[m.ModelList]:
    """The models whose window the server knows, and the window any other gets."""
    return _get("/models", m.ModelList)


def erasures() -> Request[er.ErasureList]:
    """The erasure audit trail, oldest first."""
    return _get("/erasures", er.ErasureList)


def health() -> Request[m.Health]:
    return _get("/health", m.Health)


def ready() -> Request[m.Ready]:
    """Readiness: a 503 (raised as an API error) until migrations ran and the
    projection caught up within ``CTXSTORE_READY_MAX_LAG``."""
    return _get("/ready", m.Ready)


def openapi() -> Request[m.OpenAPIDocument]:
    return _get("/openapi.json", m.OpenAPIDocument)


def stream(
    session_id: str, *, once: bool = False, interval: float | None = None
) -> Request[cr.StreamEvent]:
    """Server-sent events: occupancy and timeline, then their changes."""
    return _get(
        _s(session_id, "stream"), cr.StreamEvent, once="true" if once else None, interval=interval
    )
