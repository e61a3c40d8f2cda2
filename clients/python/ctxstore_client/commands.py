"""The session command routes as request builders (``ctxstore_client.request``).

Each builder sends the body the route reads (the server builds its command
from it and checks it); ``None`` arguments are left out, so the server's
defaults apply.  The server's test suite checks that each builder sends what
the server's own command objects post.  The builders of nodes, their
versions and HEAD are ``ctxstore_client.node_commands``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore_client import erasure_responses as er
from ctxstore_client import responses as m
from ctxstore_client.request import KEEP, Keep, Request, When, _at, _body, _post, _s, _seg


def start_session(
    title: str = "",
    model: str = "openai:gpt-4o",
    *,
    context_window: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.SessionCreated]:
    return _post("/sessions", m.SessionCreated, idempotency_key, title=title, model=model,
                 context_window=context_window, at=_at(at))  # fmt: skip


def branch(
    session_id: str,
    node_id: str,
    *,
    title: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.Branched]:
    return _post(_s(session_id, "branch"), m.Branched, idempotency_key, node_id=node_id,
                 title=title, at=_at(at), expected_version=expected_version)  # fmt: skip


def _pinning(route: str, session_id: str, node_id: str, expected_version: int | None,
             at: When, key: str | None) -> Request[m.PinChanged]:  # fmt: skip
    return _post(_s(session_id, route), m.PinChanged, key, node_id=node_id,
                 expected_version=expected_version, at=_at(at))  # fmt: skip


def pin(
    session_id: str,
    node_id: str,
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.PinChanged]:
    return _pinning("pin", session_id, node_id, expected_version, at, idempotency_key)


def unpin(
    session_id: str,
    node_id: str,
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.PinChanged]:
    return _pinning("unpin", session_id, node_id, expected_version, at, idempotency_key)


def attach(
    session_id: str,
    source_session: str,
    *,
    source_head: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.NodeAdded]:
    return _post(_s(session_id, "attach"), m.NodeAdded, idempotency_key,
                 source_session=source_session, source_head=source_head,
                 expected_version=expected_version, at=_at(at))  # fmt: skip


def merge(
    session_id: str,
    peers: Sequence[Mapping[str, str]],
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.NodeAdded]:
    """``peers``: ``{"node_id"}`` (this session) or ``{"session_id", "node_id"}``."""
    return _post(_s(session_id, "merge"), m.NodeAdded, idempotency_key,
                 peers=[dict(p) for p in peers], expected_version=expected_version,
                 at=_at(at))  # fmt: skip


def record_usage(
    session_id: str,
    request_id: str,
    *,
    usage: Mapping[str, Any] | None = None,
    input_tokens: int | None = None,
    cache_read: int | None = None,
    cache_creation: int | None = None,
    output_tokens: int | None = None,
    provider: str | None = None,
    head_node: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.UsageRecorded]:
    """``usage`` is the provider's usage object as it came back (OpenAI or Anthropic)."""
    return _post(_s(session_id, "usage"), m.UsageRecorded, idempotency_key,
                 expected_version=expected_version, request_id=request_id,
                 usage=dict(usage) if usage is not None else None, input_tokens=input_tokens,
                 cache_read=cache_read, cache_creation=cache_creation,
                 output_tokens=output_tokens, provider=provider, head_node=head_node,
                 at=_at(at))  # fmt: skip


def start_run(
    session_id: str,
    *,
    run_id: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.RunStarted]:
    return _post(_s(session_id, "runs", "start"), m.RunStarted, idempotency_key,
                 run_id=run_id, expected_version=expected_version, at=_at(at))  # fmt: skip


def finish_run(
    session_id: str,
    *,
    status: str = "completed",
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.RunFinished]:
    return _post(_s(session_id, "runs", "finish"), m.RunFinished, idempotency_key,
                 status=status, expected_version=expected_version, at=_at(at))  # fmt: skip


def switch_model(
    session_id: str,
    model: str,
    *,
    context_window: int | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.ModelChanged]:
    return _post(_s(session_id, "model"), m.ModelChanged, idempotency_key, model=model,
                 context_window=context_window, expected_version=expected_version,
                 at=_at(at))  # fmt: skip


def declare_tools(
    session_id: str,
    tools: Sequence[Mapping[str, Any]],
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.ToolsDeclared]:
    """The tools every request offers from now on (``name``, ``description``,
    ``input_schema``); each declaration replaces the last."""
    return _post(_s(session_id, "tools"), m.ToolsDeclared, idempotency_key,
                 tools=[dict(t) for t in tools], expected_version=expected_version,
                 at=_at(at))  # fmt: skip


def configure_compaction(
    session_id: str,
    *,
    instructions: str | None | Keep = KEEP,
    summarizer_model: str | None | Keep = KEEP,
    recall_tool: bool | None | Keep = KEEP,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.CompactionSet]:
    """Change the settings named: the summarizer's instructions and model for this session
    (``None`` clears one), whether its requests list the ``recall`` tool (``None``: as the
    server's policy says). A setting not named keeps its value; the answer has all three."""
    named = {"instructions": instructions, "summarizer_model": summarizer_model,
             "recall_tool": recall_tool}  # fmt: skip
    body = {k: v for k, v in named.items() if v is not KEEP}  # ``None`` is sent: it clears
    body.update(_body(expected_version=expected_version, at=_at(at)))
    return Request("POST", _s(session_id, "compaction"), m.CompactionSet, body,
                   idempotency_key=idempotency_key)  # fmt: skip


def compact(
    session_id: str, *, expected_version: int | None = None, idempotency_key: str | None = None
) -> Request[m.Compacted]:
    return _post(
        _s(session_id, "compact"), m.Compacted, idempotency_key, expected_version=expected_version
    )


def erase_session(session_id: str) -> Request[er.Erased]:
    """``DELETE /sessions/{sid}``: the session, its branches and what refers to them, gone."""
    return Request("DELETE", f"/sessions/{_seg(session_id)}", er.Erased)


def erase_tenant(confirm: str) -> Request[er.TenantErased]:
    """``DELETE /tenant``: every session of the caller's tenant; ``confirm`` names it again."""
    return Request("DELETE", "/tenant", er.TenantErased, params={"confirm": confirm})
