"""Drive every route of ``api.app.ENDPOINTS`` with ids of your choosing.

The tenancy tests call each route with another tenant's session, node and
commit ids and compare the answer with the one for ids that exist nowhere:
the two must not be told apart.  Each command gets a body that is valid in
shape, so the request reaches the domain rather than stopping at the schema.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.testclient import TestClient

from api.app import ENDPOINTS
from api.openapi import PUBLIC_PATHS, Endpoint

S = "/sessions/{sid}"


@dataclass(frozen=True)
class Ids:
    """What fills a request: the path's session, node and commit, and a second session
    (attach's source, merge's peer) with one of its nodes."""

    sid: str
    nid: str
    cid: str
    src: str
    src_nid: str


def body(ep: Endpoint, ids: Ids) -> dict[str, Any]:
    return {
        "/sessions": {"title": "probe"},
        f"{S}/nodes": {"role": "user", "input": "probe"},
        f"{S}/nodes/batch": {"nodes": [{"role": "user", "input": "probe"}]},
        f"{S}/nodes/{{nid}}/retry": {"output": "probe"},
        f"{S}/nodes/{{nid}}/edit": {"output": "probe"},
        f"{S}/checkout": {"node_id": ids.nid},
        f"{S}/branch": {"node_id": ids.nid},
        f"{S}/pin": {"node_id": ids.nid},
        f"{S}/unpin": {"node_id": ids.nid},
        f"{S}/attach": {"source_session": ids.src},
        f"{S}/merge": {"peers": [{"session_id": ids.src, "node_id": ids.src_nid}]},
        f"{S}/usage": {"request_id": "probe", "input_tokens": 1},
        f"{S}/runs/start": {},
        f"{S}/runs/finish": {},
        f"{S}/model": {"model": "openai:gpt-4o"},
        f"{S}/tools": {"tools": []},
        f"{S}/compaction": {"instructions": "probe"},
        f"{S}/compact": {},
    }[ep.path]


def call(client: TestClient, ep: Endpoint, ids: Ids, key: str | None) -> httpx.Response:
    path = ep.path.format(sid=ids.sid, nid=ids.nid, cid=ids.cid)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if ep.method == "GET":
        params = ({"once": "1"} if path.endswith("/stream")
                  else {"q": "probe"} if path.endswith("/recall") else {})  # fmt: skip
        return client.get(path, params=params, headers=headers)
    if ep.method == "DELETE":
        return client.delete(path, headers=headers)
    return client.post(path, json=body(ep, ids), headers=headers)


def private(ep: Endpoint) -> bool:
    return ep.path not in PUBLIC_PATHS


def session_routes() -> list[Endpoint]:
    """Every route that names a session in its path."""
    return [ep for ep in ENDPOINTS if "{sid}" in ep.path]


def naming_another_session() -> list[Endpoint]:
    """Routes that name a second session in the body (attach's source, merge's peer)."""
    return [ep for ep in ENDPOINTS if ep.path in (f"{S}/attach", f"{S}/merge")]


def nowhere(ids: Ids) -> Ids:
    """Ids that exist nowhere, equal where ``ids`` are equal (a session named twice)."""
    fake: dict[str, str] = {}

    def of(value: str, make: str) -> str:
        return fake.setdefault(value, make)

    return Ids(of(ids.sid, str(uuid.uuid4())), of(ids.nid, f"nowhere-{len(fake)}"),
               of(ids.cid, uuid.uuid4().hex), of(ids.src, str(uuid.uuid4())),
               of(ids.src_nid, f"nowhere-{len(fake)}"))  # fmt: skip


def answer(response: httpx.Response, ids: Ids) -> tuple[int, str, str]:
    """Status, code and message, with the ids the request named written generically."""
    error = response.json().get("error", {})
    message = str(error.get("message"))
    for name in ("sid", "src", "cid", "nid", "src_nid"):
        message = message.replace(getattr(ids, name), f"<{name}>")
    return response.status_code, str(error.get("code")), message
