"""Tenants are projected like any other field, and the key table is no projection.

A rebuild replays ``SessionStarted`` v2 to the same ``tenant`` column the
live projection wrote, and leaves ``ctx_api_keys`` (written by the CLI, not
by events) exactly as it was.
"""

from __future__ import annotations

from sqlalchemy import create_engine

from domain.store_config import sqlalchemy_url
from projections.rebuild import rebuild_and_compare
from service.api_keys import KeyStore
from service.runtime import Runtime


def test_rebuild_keeps_tenants_and_keys(store_url: str) -> None:
    rt = Runtime(store_url)
    try:
        for tenant in ("acme", "globex", None):
            sid, _ = rt.execute("start_session", "t", tenant=tenant)
            node, _ = rt.execute("append_node", str(sid), role="user", input="hi", tenant=tenant)
            rt.execute("branch", str(sid), node, tenant=tenant)
        keys = KeyStore(rt.store.engine)
        made = [keys.create("acme", "read")[0], keys.create("globex", "admin")[0]]
        keys.revoke(made[0].key_id)
        before = keys.list()
        assert sorted(s["session_id"] for s in rt.sessions_page(tenant="acme")[0]) != []
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]
    engine = create_engine(sqlalchemy_url(store_url))
    try:
        assert KeyStore(engine).list() == before
    finally:
        engine.dispose()
    rt = Runtime(store_url)
    try:
        counts = {t: len(rt.sessions_page(tenant=t)[0]) for t in ("acme", "globex", "default")}
        assert counts == {"acme": 2, "globex": 2, "default": 2}
    finally:
        rt.close()
