"""The Python client, kept importable as ``api.client``: it is ``ctxstore_client``.

The client is a distribution of its own (``clients/python``, package
``ctxstore_client``); this module re-exports it, and adds ``run``, which
posts a ``domain.commands`` object (``api.client.command_routes``), for code
that runs next to the server.
"""

from __future__ import annotations

from typing import Any

import ctxstore_client
from api.client.command_routes import request_for
from ctxstore_client import (
    Conflict,
    CtxStoreError,
    InvalidRequest,
    NotFound,
    ServerError,
    Unavailable,
    commands,
    context_responses,
    erasure_responses,
    event_data,
    node_commands,
    queries,
    responses,
    session_responses,
)
from domain.commands import Command


class Client(ctxstore_client.Client):
    def run(self, command: Command, *, idempotency_key: str | None = None) -> Any:
        """Post any ``domain.commands`` object (``api.client.command_routes``)."""
        return self.send(request_for(command, idempotency_key))


class AsyncClient(ctxstore_client.AsyncClient):
    async def run(self, command: Command, *, idempotency_key: str | None = None) -> Any:
        """Post any ``domain.commands`` object (``api.client.command_routes``)."""
        return await self.send(request_for(command, idempotency_key))


__all__ = [
    "AsyncClient", "Client", "Conflict", "CtxStoreError", "InvalidRequest", "NotFound",
    "ServerError", "Unavailable", "commands", "context_responses",
    "erasure_responses", "event_data", "node_commands", "queries", "responses",
    "session_responses",
]  # fmt: skip
