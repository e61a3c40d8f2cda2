"""Every session belongs to a tenant; to any other tenant it does not exist.

The check lives in ``CtxStore`` (``domain.tenancy.check_owner``), so it
holds whoever calls: the API passes the caller's tenant, and even a caller
that names none (the process itself) cannot attach or merge across tenants.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from domain import errors
from domain.application import CtxStore
from domain.tenancy import DEFAULT_TENANT, check_tenant


def started(app: CtxStore, tenant: str | None, *roles: str) -> tuple[str, list[str]]:
    sid, _ = app.start_session("t", tenant=tenant)
    nodes = [app.append_node(sid, role=role, output=f"{tenant} {role}", tenant=tenant)[0]
             for role in roles]  # fmt: skip
    return str(sid), nodes


def refusal(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(errors.DomainError) as caught:
        fn(*args, **kwargs)
    return caught.value.code, caught.value.message


def test_a_session_records_its_tenant_and_a_branch_inherits_it(app: CtxStore) -> None:
    sid, nodes = started(app, "acme", "user", "assistant")
    assert app.session(sid).tenant == "acme"
    branch, _ = app.branch(sid, nodes[0], tenant="acme")
    assert app.session(branch).tenant == "acme"
    plain, _ = started(app, None)
    assert app.session(plain).tenant == DEFAULT_TENANT


def test_another_tenants_session_is_unknown_exactly_like_a_missing_one(app: CtxStore) -> None:
    sid, nodes = started(app, "acme", "user")
    missing = str(uuid.uuid4())
    for attempt in (
        lambda s: app.session(s, "globex"),
        lambda s: app.append_node(s, role="user", output="x", tenant="globex"),
        lambda s: app.pin(s, nodes[0], tenant="globex"),
        lambda s: app.branch(s, nodes[0], tenant="globex"),
        lambda s: app.session_events(s, tenant="globex"),
    ):
        code, message = refusal(attempt, sid)
        assert code == "session_not_found"
        assert message.replace(sid, "?") == refusal(attempt, missing)[1].replace(missing, "?")
    assert app.session(sid).version == 2, "nothing was stored"


def test_attach_and_merge_never_cross_tenants_whoever_asks(app: CtxStore) -> None:
    mine, my_nodes = started(app, "acme", "user", "assistant")
    theirs, their_nodes = started(app, "globex", "user")
    for tenant in ("acme", None):  # the API's caller, and the process itself
        assert refusal(app.attach, mine, theirs, tenant=tenant)[0] == "session_not_found"
        peers = [{"session_id": theirs, "node_id": their_nodes[0]}]
        assert refusal(app.merge, mine, peers, tenant=tenant)[0] == "session_not_found"
    assert app.session(mine).version == 3 and app.session(theirs).version == 2
    own, _ = started(app, "acme", "user")
    assert app.attach(mine, own, tenant="acme")[0]  # within a tenant, as before


def test_tenant_names_are_checked(app: CtxStore) -> None:
    assert check_tenant("acme-1.eu_west") == "acme-1.eu_west"
    for bad in ("", "a/b", "-x", "x" * 65, "ünï"):
        assert refusal(app.start_session, "t", tenant=bad)[0] == "invalid_command"
