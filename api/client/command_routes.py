"""A ``domain.commands`` object as the HTTP request that runs it.

The client's command builders (``api.client.commands``) make the same
command objects the routes make from a body (``api.routes_commands``); this
table says where each one is posted and what comes back. The body is the
command's fields, less those the path carries and the tenant (the server
takes it from the API key).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from ctxstore_client import responses as m
from ctxstore_client.request import Request, _body, _s, _seg
from domain import commands as c
from domain.session_context import COMPACTION_SETTINGS


@dataclass(frozen=True)
class Route:
    path: Callable[[Any], str]
    answer: type[Any]
    in_path: tuple[str, ...] = ("session_id",)


ROUTES: dict[type[c.Command], Route] = {
    c.StartSession: Route(lambda x: "/sessions", m.SessionCreated, ()),
    c.AppendNode: Route(lambda x: _s(x.session_id, "nodes"), m.NodeAdded),
    c.AppendNodes: Route(lambda x: _s(x.session_id, "nodes", "batch"), m.BatchAppended),
    c.AddSibling: Route(lambda x: _s(x.session_id, "nodes", _seg(x.of), x.kind), m.VersionAdded,
                        ("session_id", "of", "kind")),
    c.Checkout: Route(lambda x: _s(x.session_id, "checkout"), m.CheckedOut),
    c.Branch: Route(lambda x: _s(x.source_session, "branch"), m.Branched, ("source_session",)),
    c.Pin: Route(lambda x: _s(x.session_id, "pin"), m.PinChanged),
    c.Unpin: Route(lambda x: _s(x.session_id, "unpin"), m.PinChanged),
    c.Attach: Route(lambda x: _s(x.session_id, "attach"), m.NodeAdded),
    c.Merge: Route(lambda x: _s(x.session_id, "merge"), m.NodeAdded),
    c.MeasureUsage: Route(lambda x: _s(x.session_id, "usage"), m.UsageRecorded),
    c.StartRun: Route(lambda x: _s(x.session_id, "runs", "start"), m.RunStarted),
    c.FinishRun: Route(lambda x: _s(x.session_id, "runs", "finish"), m.RunFinished),
    c.SwitchModel: Route(lambda x: _s(x.session_id, "model"), m.ModelChanged),
    c.DeclareTools: Route(lambda x: _s(x.session_id, "tools"), m.ToolsDeclared),
    c.ConfigureCompaction: Route(lambda x: _s(x.session_id, "compaction"), m.CompactionSet),
}  # fmt: skip


def request_for(command: c.Command, idempotency_key: str | None = None) -> Request[Any]:
    """The POST that runs ``command`` (``ValueError`` for one the API does not take)."""
    route = ROUTES.get(type(command))
    if route is None:
        raise ValueError(f"no route runs {type(command).__name__}")
    skip = {*route.in_path, "tenant", command.rest}
    body = {f.name: getattr(command, f.name) for f in fields(command) if f.name not in skip}
    if command.rest is not None:
        body.update(getattr(command, command.rest))
    if isinstance(command, c.AppendNodes):
        body["nodes"] = [_body(**node) for node in command.nodes]
    sent = _body(**body)
    if isinstance(command, c.ConfigureCompaction):  # left out keeps a setting, null clears it
        sent.pop("only", None)
        named = COMPACTION_SETTINGS if command.only is None else command.only
        sent.update((name, getattr(command, name)) for name in named)
    return Request("POST", route.path(command), route.answer, sent,
                   idempotency_key=idempotency_key)  # fmt: skip
