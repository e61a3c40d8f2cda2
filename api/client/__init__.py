"""A typed Python client for the ctxstore HTTP API, sync and async (httpx).

    from api.client import Client
    with Client("http://127.0.0.1:8000", api_key=None) as ctx:
        sid = ctx.start_session("fix the parser").session_id
        ctx.append_node(sid, "user", input="Fix the parser bug.")
        request = ctx.render(sid, shape="openai").request   # send it to the model

Answers are the ``api.responses``, ``api.session_responses`` and
``api.context_responses`` models (the same ones /openapi.json is built
from); refusals raise ``CtxStoreError`` subclasses with the API's ``code``.
``api_key`` is sent as ``Authorization: Bearer``; every command takes
``idempotency_key=`` (sent as ``Idempotency-Key``).  ``AsyncClient``
has the same methods as coroutines.  ``api.client.agents`` adapts a
session to the OpenAI Agents SDK's ``Session`` protocol.
"""

from api import context_responses, responses, session_responses
from api.client.aio import AsyncClient
from api.client.errors import (
    Conflict,
    CtxStoreError,
    InvalidRequest,
    NotFound,
    ServerError,
    Unavailable,
)
from api.client.sync import Client
from api.client.transport import event_data

__all__ = [
    "AsyncClient", "Client", "Conflict", "CtxStoreError", "InvalidRequest", "NotFound",
    "ServerError", "Unavailable", "context_responses", "event_data", "responses",
    "session_responses",
]  # fmt: skip
