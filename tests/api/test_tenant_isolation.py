"""Two tenants, random keys, a few sessions, branches, attaches and merges: neither
ever sees the other's data, on any route of ``api.app.ENDPOINTS``.

A hypothesis state machine drives both tenants through the API with keys of
random scopes (and revokes some).  Every tenant writes a marker of its own
into every title and node; the other tenant's answers must never hold it,
nor any of its session ids it did not name itself.  Calling any route with
the other tenant's session, node and commit ids answers exactly what ids
that exist nowhere answer (or 403 for a key whose scope is too narrow,
which is decided before any id is looked at), and stores nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from starlette.testclient import TestClient

from api.app import ENDPOINTS, create_app
from domain.errors import NotFound
from service.api_keys import SCOPES, KeyStore
from tests.api.every_route import Ids, answer, call, nowhere, session_routes

TENANTS = ("a", "b")


def test_two_tenants_never_see_each_others_data(runtime: Any) -> None:
    with TestClient(create_app(runtime), base_url="http://localhost") as client:
        keys = KeyStore(runtime.store.engine)
        routes = session_routes()
        reads = [ep for ep in ENDPOINTS if ep.method == "GET"]

        class Isolation(RuleBasedStateMachine):
            def __init__(self) -> None:
                super().__init__()
                run = uuid.uuid4().hex[:8]
                self.name = {t: f"{t}-{run}" for t in TENANTS}
                self.marker = {t: f"MARK-{t}-{run}" for t in TENANTS}
                self.live: dict[str, list[tuple[str, str]]] = {t: [] for t in TENANTS}
                self.sessions: dict[str, dict[str, list[str]]] = {t: {} for t in TENANTS}
                for t in TENANTS:
                    self._key(t, "write")

            # ----------------------------------------------------------- helpers

            def _key(self, t: str, scope: str) -> str:
                secret = keys.create(self.name[t], scope)[1]
                self.live[t].append((secret, scope))
                return secret

            def _writer(self, t: str) -> str:
                for secret, scope in self.live[t]:
                    if scope != "read":
                        return secret
                return self._key(t, "write")

            def _post(self, t: str, path: str, body: dict[str, Any]) -> Any:
                r = client.post(path, json=body, headers={"Authorization":
                                                          f"Bearer {self._writer(t)}"})  # fmt: skip
                self._clean(t, r, ())
                return r

            def _clean(self, t: str, response: Any, named: tuple[str, ...]) -> None:
                """Nothing of the other tenant in ``response`` but the ids the caller named."""
                other = "b" if t == "a" else "a"
                text = response.text
                for given in named:
                    text = text.replace(given, "")
                assert response.status_code < 500, response.text
                assert self.marker[other] not in text, (response.request.url, response.text)
                for sid in self.sessions[other]:
                    assert sid not in text, (response.request.url, response.text)

            def _ids(self, t: str, data: st.DataObject) -> Ids | None:
                if not self.sessions[t]:
                    return None
                sid = data.draw(st.sampled_from(list(self.sessions[t])))
                nodes = self.sessions[t][sid] or ["no-node"]
                try:
                    cid = runtime.head_commit(sid)["id"]
                except NotFound:
                    cid = "f" * 32
                src = data.draw(st.sampled_from(list(self.sessions[t])))
                src_nodes = self.sessions[t][src] or ["no-node"]
                return Ids(sid, data.draw(st.sampled_from(nodes)), cid, src,
                           data.draw(st.sampled_from(src_nodes)))  # fmt: skip

            # ------------------------------------------------------------- rules

            @initialize()
            def world(self) -> None:
                """Each tenant: two sessions of two nodes, a branch, an attach."""
                for t in TENANTS:
                    first, second = self._started(t), self._started(t)
                    r = self._post(t, f"/sessions/{first}/branch",
                                   {"node_id": self.sessions[t][first][0]})  # fmt: skip
                    assert r.status_code == 201, r.text
                    self.sessions[t][r.json()["session_id"]] = []
                    r = self._post(t, f"/sessions/{first}/attach", {"source_session": second})
                    assert r.status_code == 201, r.text
                    self.sessions[t][first].append(r.json()["node_id"])

            def _started(self, t: str) -> str:
                self.start(t)
                sid = list(self.sessions[t])[-1]
                for role in ("user", "assistant"):
                    self._append(t, sid, role)
                return sid

            def _append(self, t: str, sid: str, role: str) -> None:
                field = "input" if role == "user" else "output"
                r = self._post(t, f"/sessions/{sid}/nodes",
                               {"role": role, field: f"{self.marker[t]} {role}"})  # fmt: skip
                assert r.status_code == 201, r.text
                self.sessions[t][sid].append(r.json()["node_id"])

            @rule(t=st.sampled_from(TENANTS), scope=st.sampled_from(SCOPES))
            def new_key(self, t: str, scope: str) -> None:
                self._key(t, scope)

            @rule(t=st.sampled_from(TENANTS), data=st.data())
            def revoke(self, t: str, data: st.DataObject) -> None:
                if not self.live[t]:
                    return
                secret, scope = data.draw(st.sampled_from(self.live[t]))
                key = keys.resolve(secret)
                assert key is not None
                keys.revoke(key.key_id)
                self.live[t].remove((secret, scope))
                r = client.get("/sessions", headers={"Authorization": f"Bearer {secret}"})
                assert r.status_code == 401

            @rule(t=st.sampled_from(TENANTS))
            def start(self, t: str) -> None:
                r = self._post(t, "/sessions", {"title": f"{self.marker[t]} title"})
                assert r.status_code == 201, r.text
                self.sessions[t][r.json()["session_id"]] = []

            @precondition(lambda self: any(self.sessions.values()))
            @rule(t=st.sampled_from(TENANTS), data=st.data(),
                  role=st.sampled_from(("user", "assistant")))  # fmt: skip
            def append(self, t: str, data: st.DataObject, role: str) -> None:
                if not self.sessions[t]:
                    return
                self._append(t, data.draw(st.sampled_from(list(self.sessions[t]))), role)

            @precondition(lambda self: any(self.sessions.values()))
            @rule(t=st.sampled_from(TENANTS), data=st.data())
            def branch(self, t: str, data: st.DataObject) -> None:
                ids = self._ids(t, data)
                if ids is None or not self.sessions[t][ids.sid]:
                    return
                r = self._post(t, f"/sessions/{ids.sid}/branch",
                               {"node_id": ids.nid, "title": self.marker[t]})  # fmt: skip
                assert r.status_code == 201, r.text
                self.sessions[t][r.json()["session_id"]] = []

            @precondition(lambda self: any(self.sessions.values()))
            @rule(t=st.sampled_from(TENANTS), data=st.data(), merge=st.booleans())
            def join(self, t: str, data: st.DataObject, merge: bool) -> None:
                """Attach or merge within the tenant (a refusal is fine, a 5xx is not)."""
                ids = self._ids(t, data)
                if ids is None:
                    return
                if merge:
                    body: dict[str, Any] = {"peers": [{"session_id": ids.src,
                                                       "node_id": ids.src_nid}]}  # fmt: skip
                    r = self._post(t, f"/sessions/{ids.sid}/merge", body)
                else:
                    r = self._post(t, f"/sessions/{ids.sid}/attach", {"source_session": ids.src})
                if r.status_code == 201:
                    self.sessions[t][ids.sid].append(r.json()["node_id"])

            @precondition(lambda self: all(self.sessions.values()))
            @rule(t=st.sampled_from(TENANTS), data=st.data())
            def probe(self, t: str, data: st.DataObject) -> None:
                """Every route with the other tenant's ids, every read with one's own."""
                other = "b" if t == "a" else "a"
                if not self.live[t]:
                    self._key(t, "read")
                secret, scope = data.draw(st.sampled_from(self.live[t]))
                theirs = self._ids(other, data)
                mine = self._ids(t, data)
                assert theirs is not None and mine is not None
                versions = {s: runtime.app.session(s).version for s in self.sessions[other]}
                for ep in routes:
                    r = call(client, ep, theirs, secret)
                    self._clean(t, r, (theirs.sid, theirs.src))
                    too_narrow = (ep.method != "GET" and scope == "read") or (
                        ep.method == "DELETE" and scope != "admin"
                    )
                    if too_narrow:
                        assert r.status_code == 403, r.text
                        continue
                    assert r.status_code == 404, (ep.path, r.text)
                    fake = nowhere(theirs)
                    assert answer(r, theirs) == answer(call(client, ep, fake, secret),
                                                       fake), ep.path  # fmt: skip
                    if ep.path.endswith(("/attach", "/merge")) and scope != "read":
                        # from one's own session, naming the other's
                        crossing = Ids(mine.sid, mine.nid, mine.cid, theirs.sid, theirs.nid)
                        r = call(client, ep, crossing, secret)
                        self._clean(t, r, (theirs.sid,))
                        assert r.status_code == 404, r.text
                for ep in reads:
                    self._clean(t, call(client, ep, mine, secret), ())
                assert versions == {s: runtime.app.session(s).version
                                    for s in self.sessions[other]}  # fmt: skip

            # ------------------------------------------------------- invariants

            @invariant()
            def lists_hold_only_ones_own(self) -> None:
                for t in TENANTS:
                    if not self.live[t]:
                        continue
                    secret = self.live[t][0][0]
                    r = client.get("/sessions", params={"limit": 1000},
                                   headers={"Authorization": f"Bearer {secret}"})  # fmt: skip
                    assert r.status_code == 200, r.text
                    assert {s["session_id"] for s in r.json()["sessions"]} == set(self.sessions[t])
                    self._clean(t, r, ())
                assert client.get("/sessions").status_code == 401

        run_state_machine_as_test(
            Isolation,
            settings=settings(
                max_examples=10,
                stateful_step_count=16,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),  # fmt: skip
        )


def test_two_tenants_both_name_a_node_the_same(runtime: Any) -> None:
    """Node ids are unique per session: a 409 on an id another tenant holds would tell
    one tenant the other's ids (they used to be claimed store-wide)."""
    with TestClient(create_app(runtime), base_url="http://localhost") as client:
        keys = KeyStore(runtime.store.engine)
        for tenant in ("acme", "globex"):
            auth = {"Authorization": f"Bearer {keys.create(tenant, 'write')[1]}"}
            made = client.post("/sessions", json={"title": "t"}, headers=auth)
            assert made.status_code == 201, made.text
            path = f"/sessions/{made.json()['session_id']}/nodes"
            node = {"role": "user", "input": "secret plan", "node_id": "merger-plan"}
            first = client.post(path, json=node, headers=auth)
            assert first.status_code == 201 and first.json()["node_id"] == "merger-plan"
            again = client.post(path, json=node, headers=auth)
            assert again.status_code == 409, "within a session an id is still taken"
