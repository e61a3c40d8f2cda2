"""A typed Python client for the ctxstore HTTP API, blocking and asyncio (httpx).

    from ctxstore_client import Client
    with Client("http://127.0.0.1:8000", api_key=None) as ctx:
        sid = ctx.start_session("fix the parser").session_id
        ctx.append_node(sid, "user", input="Fix the parser bug.")
        request = ctx.render(sid, shape="openai").request   # send it to the model

A distribution of its own (``ctxstore-client``: httpx and pydantic only).
Answers are the ``ctxstore_client.responses``, ``.session_responses``,
``.context_responses`` and ``.erasure_responses`` models: the server answers
with these very classes and builds /openapi.json from them.  Refusals raise
``CtxStoreError`` subclasses with the API's ``code``.  ``api_key`` is sent
as ``Authorization: Bearer``; every command takes ``idempotency_key=``
(sent as ``Idempotency-Key``).  ``AsyncClient`` has the same methods as
coroutines.  ``ctxstore_client.agents`` (extra ``agents``) adapts a session
to the OpenAI Agents SDK's ``Session`` protocol.
"""

from ctxstore_client import context_responses, erasure_responses, responses, session_responses
from ctxstore_client.aio import AsyncClient
from ctxstore_client.errors import (
    Conflict,
    CtxStoreError,
    InvalidRequest,
    NotFound,
    ServerError,
    Unavailable,
)
from ctxstore_client.sync import Client
from ctxstore_client.transport import event_data

__all__ = [
    "AsyncClient", "Client", "Conflict", "CtxStoreError", "InvalidRequest", "NotFound",
    "ServerError", "Unavailable", "context_responses", "erasure_responses", "event_data",
    "responses", "session_responses",
]  # fmt: skip
