"""API keys and tenants over HTTP: 401, 403 and 404, route by route.

A key is created straight in the store (``service.api_keys``), as the
``ctxstore keys`` command does; from then on the server wants one.  Another
tenant's session answers exactly what a session that exists nowhere
answers, on every route, and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from api.app import ENDPOINTS, create_app
from api.client import Client, NotFound
from service.api_keys import KeyStore
from tests.api.every_route import (
    Ids,
    answer,
    call,
    naming_another_session,
    nowhere,
    private,
    session_routes,
)

# ------------------------------------------------------------------ helpers


def auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    return response.json()


@pytest.fixture
def keys(runtime: Any) -> KeyStore:
    return KeyStore(runtime.store.engine)


class Tenant:
    """A tenant with a write key, a session of three nodes, its head commit and a branch."""

    def __init__(self, client: TestClient, keys: KeyStore, name: str) -> None:
        self.name = name
        self.secret = keys.create(name, "write")[1]
        h = auth(self.secret)
        self.sid = ok(client.post("/sessions", json={"title": f"{name} main"}, headers=h), 201)[
            "session_id"
        ]
        self.nodes = []
        for role, text in (("user", "hello"), ("assistant", "hi"), ("user", "bye")):
            body = {"role": role, "input" if role == "user" else "output": f"{name}: {text}"}
            r = client.post(f"/sessions/{self.sid}/nodes", json=body, headers=h)
            self.nodes.append(ok(r, 201)["node_id"])
        self.cid = ok(client.get(f"/sessions/{self.sid}/context", headers=h))["id"]
        branch = client.post(f"/sessions/{self.sid}/branch", json={"node_id": self.nodes[1]},
                             headers=h)  # fmt: skip
        self.branch = ok(branch, 201)["session_id"]

    def ids(self) -> Ids:
        return Ids(self.sid, self.nodes[1], self.cid, self.branch, self.nodes[0])


@pytest.fixture
def two(client: TestClient, keys: KeyStore) -> tuple[Tenant, Tenant]:
    return Tenant(client, keys, "acme"), Tenant(client, keys, "globex")


def versions(runtime: Any, *sids: str) -> list[int]:
    return [runtime.app.session(sid).version for sid in sids]


# ------------------------------------------------------------- zero set-up


def test_a_store_without_keys_serves_loopback_without_one(client: TestClient) -> None:
    sid = ok(client.post("/sessions", json={"title": "t"}), 201)["session_id"]
    # no key to check a header against: it is ignored, the caller is the default tenant
    listed = ok(client.get("/sessions", headers=auth("anything")))["sessions"]
    assert [s["session_id"] for s in listed] == [sid]


def test_a_store_without_keys_refuses_other_addresses(runtime: Any) -> None:
    with TestClient(create_app(runtime), client=("203.0.113.7", 40000),
                    base_url="http://localhost") as remote:  # fmt: skip
        r = remote.get("/sessions")
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert remote.get("/health").status_code == 200


def test_warming_the_key_check_keeps_no_answer(runtime: Any) -> None:
    """A server asks whether any key exists as it starts (``KeyStore.warm``, issue 29);
    a key created between that and the first request still closes loopback access,
    as it did before the server asked early."""
    keys = KeyStore(runtime.store.engine)
    keys.warm()
    keys.create("acme", "admin")
    assert keys.any_created()
    later = KeyStore(runtime.store.engine)
    later.warm()  # a key exists: that answer is kept, as ``any_created`` keeps it
    assert later._any


def test_a_key_store_it_cannot_read_yet_still_starts(tmp_path: Any, caplog: Any) -> None:
    """Warming is a head start only: a store it cannot read is logged, not raised, and
    the first request asks again."""
    from sqlalchemy import create_engine

    unreadable = KeyStore(create_engine(f"sqlite:///{tmp_path}/missing/dir/keys.db"))
    unreadable.warm()
    assert "any API key exists failed" in caplog.text


# ------------------------------------------------------------------- 401


def test_every_private_route_wants_a_live_key(client: TestClient, keys: KeyStore,
                                              runtime: Any) -> None:  # fmt: skip
    tenant = Tenant(client, keys, "acme")
    revoked_id = keys.create("acme", "admin")
    keys.revoke(revoked_id[0].key_id)
    before = versions(runtime, tenant.sid)
    for ep in ENDPOINTS:
        for key in (None, "ctx_not-a-key", revoked_id[1], ""):
            r = call(client, ep, tenant.ids(), key)
            if not private(ep):
                assert r.status_code == 200, (ep.path, r.text)
                continue
            assert r.status_code == 401, (ep.method, ep.path, key, r.text)
            assert r.json()["error"]["code"] == "unauthenticated"
            assert r.headers["www-authenticate"].startswith("Bearer")
    assert versions(runtime, tenant.sid) == before
    assert client.get("/ui").status_code == 200  # the page; its reads need the key
    r = client.get("/sessions", headers={"Authorization": f"Basic {tenant.secret}"})
    assert r.status_code == 401


# ------------------------------------------------------------------- 403


def test_scopes_read_write_admin(client: TestClient, keys: KeyStore, runtime: Any) -> None:
    tenant = Tenant(client, keys, "acme")
    read = keys.create("acme", "read")[1]
    admin = keys.create("acme", "admin")[1]
    before = versions(runtime, tenant.sid)
    for ep in ENDPOINTS:
        r = call(client, ep, tenant.ids(), read)
        if ep.method == "GET":
            assert r.status_code < 400, (ep.path, r.text)
        else:
            assert r.status_code == 403, (ep.path, r.text)
            assert r.json()["error"]["code"] == "forbidden"
    assert versions(runtime, tenant.sid) == before
    # admin may write too; erasure (DELETE) is for admin keys only: write is forbidden
    r = client.post(f"/sessions/{tenant.sid}/nodes", json={"role": "user", "input": "x"},
                    headers=auth(admin))  # fmt: skip
    assert r.status_code == 201
    assert client.delete(f"/sessions/{tenant.sid}", headers=auth(tenant.secret)).status_code == 403
    assert client.delete(f"/sessions/{tenant.sid}", headers=auth(admin)).status_code == 200


# ------------------------------------------------------------------- 404


def test_another_tenants_session_is_not_found_on_every_route(
    client: TestClient, two: tuple[Tenant, Tenant], runtime: Any, keys: KeyStore
) -> None:
    acme, globex = two
    before = versions(runtime, globex.sid, globex.branch)
    theirs = globex.ids()
    unknown = nowhere(theirs)
    routes = session_routes()
    assert len(routes) >= 30
    admin = keys.create("acme", "admin")[1]  # erasure (DELETE) needs an admin key
    for ep in routes:
        key = admin if ep.method == "DELETE" else acme.secret
        r = call(client, ep, theirs, key)
        assert r.status_code == 404, (ep.method, ep.path, r.text)
        assert r.json()["error"]["code"] == "session_not_found"
        assert answer(r, theirs) == answer(call(client, ep, unknown, key), unknown)
        assert "globex" not in r.text
    # attach and merge from acme's own session, naming globex's
    own = Ids(acme.sid, acme.nodes[2], acme.cid, globex.sid, globex.nodes[0])
    own_unknown = Ids(acme.sid, acme.nodes[2], acme.cid, unknown.src, unknown.src_nid)
    for ep in naming_another_session():
        r = call(client, ep, own, acme.secret)
        assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
        assert answer(r, own) == answer(call(client, ep, own_unknown, acme.secret), own_unknown)
    assert versions(runtime, globex.sid, globex.branch) == before
    # and the other way round
    r = client.get(f"/sessions/{acme.sid}/render", headers=auth(globex.secret))
    assert r.status_code == 404


def test_queries_naming_another_tenants_nodes_or_commits(
    client: TestClient, two: tuple[Tenant, Tenant]
) -> None:
    acme, globex = two
    h = auth(acme.secret)
    for path, params in (
        (f"/sessions/{acme.sid}/commits/{globex.cid}", {}),
        (f"/sessions/{acme.sid}/commits/{globex.cid}/transitions", {}),
        (f"/sessions/{acme.sid}/render", {"commit": globex.cid}),
        (f"/sessions/{acme.sid}/explain/{globex.nodes[0]}", {}),
        (f"/sessions/{acme.sid}/nodes", {"head": globex.nodes[0]}),
    ):
        theirs = client.get(path, params=params, headers=h)
        assert "globex" not in theirs.text, path
        fake = path.replace(globex.cid, "f" * 32).replace(globex.nodes[0], "zz")
        other = client.get(fake, params={k: "f" * 32 if v == globex.cid else "zz"
                                          for k, v in params.items()}, headers=h)  # fmt: skip
        assert theirs.status_code == other.status_code, (path, theirs.text, other.text)
        if theirs.status_code >= 400:
            assert theirs.json()["error"]["code"] == other.json()["error"]["code"]
    # named by key, another tenant's node reads exactly like a node that exists nowhere
    key = f"{globex.sid}/{globex.nodes[0]}"
    for ref in (key, quote(key, safe="")):
        theirs = client.get(f"/sessions/{acme.sid}/explain/{ref}", headers=h)
        fake = client.get(f"/sessions/{acme.sid}/explain/{ref.replace(globex.nodes[0], 'zz')}",
                          headers=h)  # fmt: skip
        assert theirs.status_code == fake.status_code == 404, theirs.text
        assert theirs.json()["error"]["message"].replace(globex.nodes[0], "zz") == fake.json()[
            "error"]["message"]  # fmt: skip


def test_each_tenant_lists_only_its_own_sessions(
    client: TestClient, two: tuple[Tenant, Tenant], runtime: Any
) -> None:
    for tenant in two:
        listed = ok(client.get("/sessions", headers=auth(tenant.secret)))["sessions"]
        assert {s["session_id"] for s in listed} == {tenant.sid, tenant.branch}
    assert len(runtime.sessions()) == 4  # the process itself sees every one


def test_the_client_sends_its_key(client: TestClient, two: tuple[Tenant, Tenant]) -> None:
    acme, globex = two
    ctx = Client(http=client, api_key=acme.secret)
    assert ctx.get_session(acme.sid).head == acme.nodes[2]
    assert {s.session_id for s in ctx.iter_sessions()} == {acme.sid, acme.branch}
    with pytest.raises(NotFound):
        ctx.render(globex.sid)
    with pytest.raises(NotFound):
        ctx.attach(acme.sid, globex.sid)


@pytest.fixture
def keyed_server(live_server: str, store_url: str) -> Iterator[tuple[str, str]]:
    from sqlalchemy import create_engine

    from domain.store_config import sqlalchemy_url

    engine = create_engine(sqlalchemy_url(store_url))
    try:
        yield live_server, KeyStore(engine).create("acme", "write")[1]
    finally:
        engine.dispose()


def test_the_agents_session_opens_with_a_key(keyed_server: tuple[str, str]) -> None:
    import asyncio

    from api.client.agents import CtxStoreSession

    base, secret = keyed_server

    async def drive() -> None:
        session = await CtxStoreSession.open(base, api_key=secret, title="agents")
        try:
            await session.add_items([{"role": "user", "content": "hi"}])
            again = await CtxStoreSession.open(base, session.session_id, api_key=secret)
            assert await again.get_all_items() == [{"role": "user", "content": "hi"}]
            await again.client.aclose()
            with pytest.raises(Exception) as refused:
                await CtxStoreSession.open(base, session.session_id)  # no key
            assert "401" in str(refused.value) or "unauthenticated" in str(refused.value)
        finally:
            await session.client.aclose()

    asyncio.run(drive())
