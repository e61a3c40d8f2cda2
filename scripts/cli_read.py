"""``ctxstore export`` and ``replay``: the write side read back, no projections needed
(except ``replay --render``, which projects in memory)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from domain.errors import InvalidCommand
from domain.policy import Policy
from scripts.cli_common import STORE_ERRORS, Failed, _app, _print_json, _url
from scripts.progress import Progress
from service.event_json import export_line

EXPORT_PAGE = 1_000  # events read at a time, so a long export can show its progress


def _export_line(event: Any, redact: bool) -> str:
    """``export_line``, with secrets masked when the policy redacts (``domain/rules/redact``)."""
    line = export_line(event)
    if not redact:
        return line
    from domain.rules.redact import mask_json

    record = json.loads(line)
    record["data"] = mask_json(record["data"])[0]
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def cmd_export(args: argparse.Namespace) -> int:
    redact = Policy.from_env().redact_secrets
    app = _app(args)
    lines: list[str] = []
    try:
        session = app.session(args.session_id)
        with Progress("export", session.version, "events") as bar:
            while len(lines) < session.version:
                page = app.events_of(session.id, gt=len(lines), lte=session.version,
                                     limit=EXPORT_PAGE)  # fmt: skip
                if not page:
                    break
                lines += [_export_line(event, redact) + "\n" for event in page]
                bar.update(len(lines))
    finally:
        app.close()
    if args.out:
        try:
            Path(args.out).write_text("".join(lines), encoding="utf-8")
        except OSError as exc:
            raise Failed("bad_file", f"{args.out}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write("".join(lines))
    return 0


def session_state(session: Any) -> dict[str, Any]:
    """What ``replay`` prints: the aggregate's state, nodes in seq order."""
    nodes = sorted(session.nodes.items(), key=lambda item: item[1]["seq"])
    return {
        "session_id": str(session.id), "version": session.version, "title": session.title,
        "model": session.model, "context_window": session.context_window,
        "branched_from": session.branched_from, "head": session.head,
        "node_count": len(nodes), "running": session.running, "pinned": list(session.pinned),
        "nodes": [{"node_id": nid, "seq": raw["seq"], "role": raw["role"],
                   "parent": raw["parent"], "edge": raw["edge"], "name": raw.get("name")}
                  for nid, raw in nodes],
    }  # fmt: skip


def cmd_replay(args: argparse.Namespace) -> int:
    if args.render:
        return _replay_render(args)
    app = _app(args)
    try:
        latest = app.session(args.session_id).version
        if not 1 <= args.to <= latest:
            raise InvalidCommand(f"--to must be within 1..{latest} for this session")
        state = session_state(app.replay(args.session_id, args.to))
    finally:
        app.close()
    if Policy.from_env().redact_secrets:  # the title, as every read masks it
        from domain.rules.redact import mask_reply

        state = mask_reply(state)
    _print_json(state)
    return 0


def _replay_render(args: argparse.Namespace) -> int:
    """The provider request at event N, projected in memory (nothing is written)."""
    from domain.tokens import check_tokenizer
    from projections.replay import request_at
    from projections.store import ProjectionStore

    check_tokenizer()
    app = _app(args)
    store = ProjectionStore(_url(args))
    try:
        try:
            store.policy_history()  # the rules the live projection recorded, if it ran
            rules: ProjectionStore | None = store
        except STORE_ERRORS:
            rules = None  # never served or migrated: the configured rules
        request = request_at(app, rules, args.session_id, args.to, args.render)
    finally:
        store.close()
        app.close()
    print(json.dumps(request, indent=2, ensure_ascii=False))
    return 0
