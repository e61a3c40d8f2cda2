"""Every command route as a request builder (``api.client.request``).

Each builder makes the ``domain.commands`` object the route makes from the
body, and ``api.client.command_routes.request_for`` posts it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api import responses as m
from api.client.command_routes import request_for
from api.client.request import Request, When, _post, _s
from domain import commands as c


def start_session(
    title: str = "",
    model: str = "openai:gpt-4o",
    *,
    context_window: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.SessionCreated]:
    command = c.StartSession(title=title, model=model, context_window=context_window, at=at)
    return request_for(command, idempotency_key)


def append_node(
    session_id: str,
    role: str,
    *,
    input: Any = None,
    output: Any = None,
    name: str | None = None,
    node_id: str | None = None,
    predecessor: str | None = None,
    caller: str | None = None,
    call_id: str | None = None,
    reads: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.NodeAdded]:
    command = c.AppendNode.build(
        session_id=session_id,
        expected_version=expected_version,
        role=role,
        input=input,
        output=output,
        name=name,
        node_id=node_id,
        predecessor=predecessor,
        caller=caller,
        call_id=call_id,
        reads=list(reads) if reads is not None else None,
        metadata=dict(metadata) if metadata is not None else None,
        at=at,
    )
    return request_for(command, idempotency_key)


def append_nodes(
    session_id: str,
    nodes: Sequence[Mapping[str, Any]],
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.BatchAppended]:
    """Several nodes in one atomic command; each is a dict of ``append_node``'s fields
    (or ``sibling_of`` and ``kind`` for a version of a node)."""
    command = c.AppendNodes(session_id=session_id, nodes=[dict(node) for node in nodes],
                            expected_version=expected_version, at=at)  # fmt: skip
    return request_for(command, idempotency_key)


def _version(
    kind: str,
    session_id: str,
    of: str,
    input: Any,
    output: Any,
    name: str | None,
    node_id: str | None,
    metadata: Mapping[str, Any] | None,
    expected_version: int | None,
    at: When,
    key: str | None,
) -> Request[m.VersionAdded]:
    command = c.AddSibling.build(
        session_id=session_id,
        of=of,
        kind=kind,
        expected_version=expected_version,
        input=input,
        output=output,
        name=name,
        node_id=node_id,
        metadata=dict(metadata) if metadata is not None else None,
        at=at,
    )
    return request_for(command, key)


def retry(
    session_id: str,
    of: str,
    *,
    input: Any = None,
    output: Any = None,
    name: str | None = None,
    node_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.VersionAdded]:
    """A new sample of the same prompt: a sibling version of ``of`` of kind retry."""
    return _version(
        "retry",
        session_id,
        of,
        input,
        output,
        name,
        node_id,
        metadata,
        expected_version,
        at,
        idempotency_key,
    )


def edit(
    session_id: str,
    of: str,
    *,
    input: Any = None,
    output: Any = None,
    name: str | None = None,
    node_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.VersionAdded]:
    """A changed node: a sibling version of ``of`` of kind edit."""
    return _version(
        "edit",
        session_id,
        of,
        input,
        output,
        name,
        node_id,
        metadata,
        expected_version,
        at,
        idempotency_key,
    )


def checkout(
    session_id: str,
    node_id: str,
    *,
    version: int | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.CheckedOut]:
    command = c.Checkout(session_id=session_id, node_id=node_id, version=version,
                         expected_version=expected_version, at=at)  # fmt: skip
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
                       expected_version=expected_version, at=at)  # fmt: skip
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
                    expected_version=expected_version, at=at)  # fmt: skip
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
                      expected_version=expected_version, at=at)  # fmt: skip
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
                       at=at)  # fmt: skip
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
                      expected_version=expected_version, at=at)  # fmt: skip
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
        at=at,
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
                         expected_version=expected_version, at=at)  # fmt: skip
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
                          expected_version=expected_version, at=at)  # fmt: skip
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
                            expected_version=expected_version, at=at)  # fmt: skip
    return request_for(command, idempotency_key)


def compact(
    session_id: str, *, expected_version: int | None = None, idempotency_key: str | None = None
) -> Request[m.Compacted]:
    return _post(
        _s(session_id, "compact"), m.Compacted, idempotency_key, expected_version=expected_version
    )
