"""The node command routes as request builders: a node, a batch, a retry or edit, HEAD.

Each builder sends the body the route reads (the server builds and checks
its command from it); the session's other commands are
``ctxstore_client.commands``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore_client import responses as m
from ctxstore_client.request import Request, When, _at, _body, _post, _s, _seg


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
        at=_at(at),
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
    return _post(_s(session_id, "nodes", "batch"), m.BatchAppended, idempotency_key,
                 nodes=[_body(**node) for node in nodes], expected_version=expected_version,
                 at=_at(at))  # fmt: skip


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
        expected_version=expected_version,
        input=input,
        output=output,
        name=name,
        node_id=node_id,
        metadata=dict(metadata) if metadata is not None else None,
        at=_at(at),
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
    return _post(_s(session_id, "checkout"), m.CheckedOut, idempotency_key, node_id=node_id,
                 version=version, expected_version=expected_version, at=_at(at))  # fmt: skip
