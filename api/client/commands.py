"""The session command routes as request builders (``api.client.request``).

Each builder makes the ``domain.commands`` object the route makes from the
body, and ``api.client.command_routes.request_for`` posts it.  The builders
of nodes, their versions and HEAD are ``api.client.node_commands``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api import responses as m
from api.client.command_routes import request_for
from api.client.request import Request, When, _at, _post, _s
from domain import commands as c


def start_session(
    title: str = "",
    model: str = "openai:gpt-4o",
    *,
    context_window: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.SessionCreated]:
    command = c.StartSession(title=title, model=model, context_window=context_window, at=_at(at))
    return request_for(command, idempotency_key)


def branch(
    session_id: str,
    node_id: str,
    *,
    title: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.Branched]:
    command = c.Branch(source_session=session_id, node_id=node_id, title=title,
                       expected_version=expected_version, at=_at(at))  # fmt: skip
    return request_for(command, idempotency_key)


def pin(
    session_id: str,
    node_id: str,
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.PinChanged]:
    command = c.Pin(session_id=session_id, node_id=node_id,
                    expected_version=expected_version, at=_at(at))  # fmt: skip
    return request_for(command, idempotency_key)


def unpin(
    session_id: str,
    node_id: str,
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.PinChanged]:
    command = c.Unpin(session_id=session_id, node_id=node_id,
                      expected_version=expected_version, at=_at(at))  # fmt: skip
    return request_for(command, idempotency_key)


def attach(
    session_id: str,
    source_session: str,
    *,
    source_head: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.NodeAdded]:
    command = c.Attach(session_id=session_id, source_session=source_session,
                       source_head=source_head, expected_version=expected_version,
                       at=_at(at))  # fmt: skip
    return request_for(command, idempotency_key)


def merge(
    session_id: str,
    peers: Sequence[Mapping[str, str]],
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.NodeAdded]:
    """``peers``: ``{"node_id"}`` (this session) or ``{"session_id", "node_id"}``."""
    command = c.Merge(session_id=session_id, peers=[dict(p) for p in peers],
                      expected_version=expected_version, at=_at(at))  # fmt: skip
    return request_for(command, idempotency_key)


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
    command = c.MeasureUsage.build(
        session_id=session_id,
        expected_version=expected_version,
        request_id=request_id,
        usage=dict(usage) if usage is not None else None,
        input_tokens=input_tokens,
        cache_read=cache_read,
        cache_creation=cache_creation,
        output_tokens=output_tokens,
        provider=provider,
        head_node=head_node,
        at=_at(at),
    )
    return request_for(command, idempotency_key)


def start_run(
    session_id: str,
    *,
    run_id: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.RunStarted]:
    command = c.StartRun(session_id=session_id, run_id=run_id,
                         expected_version=expected_version, at=_at(at))  # fmt: skip
    return request_for(command, idempotency_key)


def finish_run(
    session_id: str,
    *,
    status: str = "completed",
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.RunFinished]:
    command = c.FinishRun(session_id=session_id, status=status,
                          expected_version=expected_version, at=_at(at))  # fmt: skip
    return request_for(command, idempotency_key)


def switch_model(
    session_id: str,
    model: str,
    *,
    context_window: int | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.ModelChanged]:
    command = c.SwitchModel(session_id=session_id, model=model, context_window=context_window,
                            expected_version=expected_version, at=_at(at))  # fmt: skip
    return request_for(command, idempotency_key)


def compact(
    session_id: str, *, expected_version: int | None = None, idempotency_key: str | None = None
) -> Request[m.Compacted]:
    return _post(
        _s(session_id, "compact"), m.Compacted, idempotency_key, expected_version=expected_version
    )
