"""The route table and the OpenAPI 3.1 document built from it.

Each routes module lists its ``Endpoint``s; ``create_app`` mounts them and
``document`` describes them, so the served spec can never drift from the
routes.  Request and response schemas come straight from the pydantic
models (``api.schemas``, ``api.query_params``, ``api.*responses``); every response model allows
additional properties, so fields added later do not break the document.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

Handler = Callable[[Request], Awaitable[Response]]
PUBLIC_PATHS = ("/health", "/ready", "/openapi.json")  # served without a key (api.auth)


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    summary: str
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    status: int = 200
    media_type: str = "application/json"
    errors: tuple[int, ...] = ()
    response: type[BaseModel] | None = None
    # path parameters that may hold a ``/`` (an item copied from another session
    # names its node ``session/node_id``): Starlette's ``path`` convertor
    slashed: tuple[str, ...] = ()

    @property
    def route(self) -> str:
        """The Starlette route of ``path`` (the OpenAPI template)."""
        out = self.path
        for name in self.slashed:
            out = out.replace(f"{{{name}}}", f"{{{name}:path}}")
        return out


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        }
    },
}

ERROR_TEXT = {
    400: "malformed_json (the body is not JSON), json_too_deep, or bad_host (Host not allowed)",
    401: "unauthenticated: no API key, or an unknown or revoked one (WWW-Authenticate: Bearer)",
    403: "forbidden: the key's scope does not allow this method",
    408: "request_timeout: the body did not arrive within the read timeout",
    413: "body_too_large, or content_too_large (a node over the node limit)",
    415: "unsupported_media_type: a command without Content-Type: application/json",
    404: "session_not_found, node_not_found or not_found",
    409: "stale_version, agent_running, duplicate_node, ...",
    422: "invalid_request (schema) or a domain refusal (invalid_command, invalid_edge, ...)",
    429: "too_many_requests or too_many_streams for this client (Retry-After)",
    502: "summarizer_failed",
    503: "database_unavailable: the database is busy or unreachable (Retry-After); "
    "restart_required: the store was split into other partitions since this server started",
}


IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "a retry with the same key answers the first answer and stores nothing, "
    "within CTXSTORE_IDEMPOTENCY_TTL (24 h by default) and until its session is erased",
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": "^[!-~]([ -~]*[!-~])?$",
    },
}


def _hoist(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """Move ``$defs`` into components and repoint the refs (theirs too)."""
    defs: dict[str, Any] = {}

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            if "x-ref" in node:  # ``ctxstore_client.render_schemas``' markers, and its ``x-defs``
                return {"$ref": f"#/components/schemas/{node['x-ref']}"}
            defs.update(node.get("$defs", {}))
            defs.update(node.get("x-defs", {}))
            return {
                k: (v.replace("#/$defs/", "#/components/schemas/") if k == "$ref" else fix(v))
                for k, v in node.items()
                if k not in ("$defs", "x-defs")
            }
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    fixed_top: dict[str, Any] = fix(schema)
    while defs:
        name, sub = defs.popitem()
        components[name] = fix(sub)
    return fixed_top


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


def _response_schema(ep: Endpoint, components: dict[str, Any]) -> dict[str, Any]:
    if ep.response is None:
        return {"type": "object"}
    name = ep.response.__name__
    components[name] = _hoist(ep.response.model_json_schema(), components)
    return {"$ref": f"#/components/schemas/{name}"}


def _operation(ep: Endpoint, components: dict[str, Any]) -> dict[str, Any]:
    params = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{(\w+)}", ep.path)
    ]
    if ep.query is not None:
        params += _query_parameters(ep.query)
    if ep.method == "POST":
        params.append(IDEMPOTENCY_KEY)
    op: dict[str, Any] = {
        "operationId": f"{ep.method.lower()}_{ep.handler.__name__}",
        "summary": ep.summary,
        "parameters": params,
        "responses": {
            str(ep.status): {
                "description": "OK",
                "content": {ep.media_type: {"schema": _response_schema(ep, components)}},
            }
        },
    }
    if ep.body is not None:
        name = ep.body.__name__
        components[name] = _hoist(ep.body.model_json_schema(), components)
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
    # Any route may find the database locked, a Host not allowed, or its client over its limit.
    codes = set(ep.errors) | {400, 429, 503}
    if ep.path not in PUBLIC_PATHS:  # api.auth: a key, of a scope the method needs
        codes |= {401, 403}
        op["security"] = [{"bearer": []}]
    else:
        op["security"] = []
    if params and params[0]["in"] == "path":
        codes.add(404)
    if ep.body is not None:
        codes |= {408, 413, 415, 422}
        if "expected_version" in ep.body.model_fields:
            codes.add(409)  # stale_version
    if ep.query is not None:
        codes.add(422)
    for code in sorted(codes):
        op["responses"][str(code)] = {
            "description": ERROR_TEXT.get(code, "error"),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return op


def document(endpoints: Iterable[Endpoint], version: str = "0.1.0") -> dict[str, Any]:
    components: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for ep in endpoints:
        paths.setdefault(ep.path, {})[ep.method.lower()] = _operation(ep, components)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ctxstore",
            "version": version,
            "description": "An agent's conversation history as an append-only DAG, and "
            "exactly what the model is fed on each call, and why.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "an API key from `ctxstore keys create`; a server whose store "
                    "has no key yet serves loopback clients without one",
                }
            },
        },
    }
