"""Every command route as a request builder (``api.client.request``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api import responses as m
from api.client.request import Request, When, _body, _post, _s, _seg


def start_session(
    title: str = "",
    model: str = "openai:gpt-4o",
    *,
    context_window: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.SessionCreated]:
    return _post(
        "/sessions",
        m.SessionCreated,
        idempotency_key,
        title=title,
        model=model,
        context_window=context_window,
        at=at,
    )


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
    return _post(
        _s(session_id, "nodes"),
        m.NodeAdded,
        idempotency_key,
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
        expected_version=expected_version,
        at=at,
    )


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
    return _post(
        _s(session_id, "nodes", "batch"),
        m.BatchAppended,
        idempotency_key,
        nodes=[_body(**node) for node in nodes],
        expected_version=expected_version,
        at=at,
    )


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
    return _post(
        _s(session_id, "nodes", _seg(of), kind),
        m.VersionAdded,
        key,
        input=input,
        output=output,
        name=name,
        node_id=node_id,
        metadata=dict(metadata) if metadata is not None else None,
        expected_version=expected_version,
        at=at,
    )


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
    return _post(
        _s(session_id, "checkout"),
        m.CheckedOut,
        idempotency_key,
        node_id=node_id,
        version=version,
        expected_version=expected_version,
        at=at,
    )


def branch(
    session_id: str,
    node_id: str,
    *,
    title: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.Branched]:
    return _post(
        _s(session_id, "branch"),
        m.Branched,
        idempotency_key,
        node_id=node_id,
        title=title,
        expected_version=expected_version,
        at=at,
    )


def pin(
    session_id: str,
    node_id: str,
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.PinChanged]:
    return _post(
        _s(session_id, "pin"),
        m.PinChanged,
        idempotency_key,
        node_id=node_id,
        expected_version=expected_version,
        at=at,
    )


def unpin(
    session_id: str,
    node_id: str,
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.PinChanged]:
    return _post(
        _s(session_id, "unpin"),
        m.PinChanged,
        idempotency_key,
        node_id=node_id,
        expected_version=expected_version,
        at=at,
    )


def attach(
    session_id: str,
    source_session: str,
    *,
    source_head: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.NodeAdded]:
    return _post(
        _s(session_id, "attach"),
        m.NodeAdded,
        idempotency_key,
        source_session=source_session,
        source_head=source_head,
        expected_version=expected_version,
        at=at,
    )


def merge(
    session_id: str,
    peers: Sequence[Mapping[str, str]],
    *,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.NodeAdded]:
    """``peers``: ``{"node_id"}`` (this session) or ``{"session_id", "node_id"}``."""
    return _post(
        _s(session_id, "merge"),
        m.NodeAdded,
        idempotency_key,
        peers=[dict(p) for p in peers],
        expected_version=expected_version,
        at=at,
    )


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
    return _post(
        _s(session_id, "usage"),
        m.UsageRecorded,
        idempotency_key,
        request_id=request_id,
        usage=dict(usage) if usage is not None else None,
        input_tokens=input_tokens,
        cache_read=cache_read,
        cache_creation=cache_creation,
        output_tokens=output_tokens,
        provider=provider,
        head_node=head_node,
        expected_version=expected_version,
        at=at,
    )


def start_run(
    session_id: str,
    *,
    run_id: str | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.RunStarted]:
    return _post(
        _s(session_id, "runs", "start"),
        m.RunStarted,
        idempotency_key,
        run_id=run_id,
        expected_version=expected_version,
        at=at,
    )


def finish_run(
    session_id: str,
    *,
    status: str = "completed",
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.RunFinished]:
    return _post(
        _s(session_id, "runs", "finish"),
        m.RunFinished,
        idempotency_key,
        status=status,
        expected_version=expected_version,
        at=at,
    )


def switch_model(
    session_id: str,
    model: str,
    *,
    context_window: int | None = None,
    expected_version: int | None = None,
    at: When = None,
    idempotency_key: str | None = None,
) -> Request[m.ModelChanged]:
    return _post(
        _s(session_id, "model"),
        m.ModelChanged,
        idempotency_key,
        model=model,
        context_window=context_window,
        expected_version=expected_version,
        at=at,
    )


def compact(
    session_id: str, *, expected_version: int | None = None, idempotency_key: str | None = None
) -> Request[m.Compacted]:
    return _post(
        _s(session_id, "compact"), m.Compacted, idempotency_key, expected_version=expected_version
    )
