"""The ``ctxstore`` command line.

    ctxstore serve   [--host 127.0.0.1] [--port 8000] [--workers 1] [--db URL]
    ctxstore demo    [--host] [--port] [--db URL]   # migrate, import the sample, serve
    ctxstore migrate [--db URL]
    ctxstore import  FILE.jsonl [--tenant T] [--db URL]  # prints the new session id
    ctxstore export  SESSION_ID [--db URL] [--out FILE]
    ctxstore replay  SESSION_ID --to VERSION [--render neutral|openai|anthropic] [--db URL]
    ctxstore worker  [--db URL] [--interval 0.5]     # projections as their own process
    ctxstore rebuild [--db URL]                      # exit 1 if the digests differ
    ctxstore keys create --tenant T --scope read|write|admin [--db URL]  # prints the secret once
    ctxstore keys list   [--db URL]
    ctxstore keys revoke KEY_ID [--db URL]
    ctxstore erase   SESSION_ID [--db URL] [--by NAME] # erase it (and its branches) for good
    ctxstore erase   --tenant T [--db URL] [--by NAME] # every session of tenant T

``--db`` defaults to ``CTXSTORE_DATABASE_URL`` (else ``sqlite:///ctxstore.db``).

Transcripts are JSONL, one command a line after a ``session`` line; the format
is documented in ``scripts/transcript.py``.  Exports are JSONL too, one event a
line with sorted keys, so exporting the same session twice gives the same bytes.

Expected failures (unknown session, bad transcript, bad URL) print
``error: <code>: <message>`` and exit 2; only bugs show a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from eventsourcing import persistence as es_persistence
from sqlalchemy import exc as sa_exc

from api.limits import Limits
from domain.application import CtxStore
from domain.errors import DomainError, InvalidCommand
from domain.policy import InvalidPolicy, Policy
from domain.store_config import database_url, eventsourcing_env
from domain.tokens import TokenizerUnavailable
from projections.store import DATABASE_ERRORS, database_error_line
from scripts import demo, transcript
from scripts.progress import Progress
from service.event_json import export_line

# Any other error a database reports (sqlite3's, SQLAlchemy's, eventsourcing's).
STORE_ERRORS = (sqlite3.DatabaseError, sa_exc.DatabaseError, es_persistence.DatabaseError)
INTEGRITY_ERRORS = (sqlite3.IntegrityError, sa_exc.IntegrityError, es_persistence.IntegrityError)


class Failed(Exception):
    """An expected failure: printed as ``error: code: message``, never a traceback."""

    def __init__(self, code: str, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _url(args: argparse.Namespace) -> str:
    url = str(args.db if args.db is not None else database_url())
    if not url.strip():
        raise Failed("bad_database_url", "the database URL is empty")
    try:
        eventsourcing_env(url)  # refuses a scheme neither store speaks
    except ValueError as exc:
        raise Failed("bad_database_url", str(exc)) from None
    return url


def _app(args: argparse.Namespace) -> CtxStore:
    """The write side alone: export and replay need no projections or tokenizer."""
    url = _url(args)
    _reachable(url)
    return CtxStore(url=url)


def _reachable(url: str) -> None:
    """Connect once, briefly, to say why a PostgreSQL server cannot be used.

    eventsourcing's pool retries for 30 s and then reports only that it got
    no connection; one direct attempt names the cause (no such database,
    role or host) within seconds.  The projection side already fails that way.
    """
    if not url.startswith(("postgresql", "postgres")):
        return
    import psycopg

    try:
        psycopg.connect("postgresql://" + url.split("://", 1)[1], connect_timeout=5).close()
    except psycopg.Error as exc:
        raise Failed("database_unavailable", database_error_line(exc), 1) from None


def _migrate(url: str) -> None:
    from projections.migrate import upgrade

    upgrade(url)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


# ---------------------------------------------------------------- commands


def cmd_migrate(args: argparse.Namespace) -> int:
    _migrate(_url(args))
    print(f"migrated {_url(args)}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    print(transcript.import_file(_url(args), args.file, args.tenant))
    return 0


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


def cmd_worker(args: argparse.Namespace) -> int:
    from service.runtime import Runtime  # export and replay never load the projections

    runtime = Runtime(_url(args))
    stopping: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    print(f"worker: projecting {_url(args)} every {args.interval}s (Ctrl-C stops)", flush=True)
    backoff = 0.0
    try:
        while not stopping:
            try:
                count = runtime.catch_up()
            except DATABASE_ERRORS as exc:
                # A locked or briefly unreachable database is weather, not a bug:
                # the batch rolled back whole, so wait and take it again.
                backoff = min(max(backoff * 2, args.interval, 0.5), 30.0)
                print(f"worker: database unavailable ({database_error_line(exc)}); "
                      f"retrying in {backoff:g}s", file=sys.stderr, flush=True)  # fmt: skip
                time.sleep(backoff)
                continue
            backoff = 0.0
            if count:
                print(f"worker: {count} event(s), position {runtime.position()}", flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        runtime.close()
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from projections.rebuild import rebuild_and_compare

    url = _url(args)
    _migrate(url)
    with Progress("rebuild", None, "events") as bar:
        result = rebuild_and_compare(url, progress=bar.update)
    _print_json(result)
    return 0 if result.get("identical") else 1


def _key_store(url: str) -> Any:
    from sqlalchemy import create_engine

    from domain.store_config import sqlalchemy_url
    from service.api_keys import KeyStore

    _reachable(url)
    _migrate(url)  # the key table comes with revision 0009
    return KeyStore(create_engine(sqlalchemy_url(url)))


def cmd_keys(args: argparse.Namespace) -> int:
    """Create, list or revoke API keys (``service.api_keys``); no server needs to run."""
    keys = _key_store(_url(args))
    try:
        if args.keys_command == "create":
            key, secret = keys.create(args.tenant, args.scope)
            print(f"key {key.key_id} for tenant {key.tenant!r}, scope {key.scope}; its secret "
                  "(shown only now, stored only as a hash):", file=sys.stderr)  # fmt: skip
            print(secret)
        elif args.keys_command == "list":
            for key in keys.list():
                row = key.to_json()
                revoked = f"  revoked {row['revoked_at']}" if row["revoked_at"] else ""
                print(f"{row['key_id']}  {row['tenant']}  {row['scope']:<5}  "
                      f"created {row['created_at']}{revoked}")  # fmt: skip
        else:
            key = keys.revoke(args.key_id)
            print(f"revoked {key.key_id} (tenant {key.tenant!r})")
    finally:
        keys.engine.dispose()
    return 0


def _auth_note(url: str, host: str) -> None:
    """Say how this server will treat clients (``api.auth``), before it starts."""
    keys = _key_store(url)
    try:
        have_keys = keys.any_created()
    finally:
        keys.engine.dispose()
    if have_keys:
        print("API keys are on: send Authorization: Bearer <key> (ctxstore keys create)",
              flush=True)  # fmt: skip
    elif host not in ("127.0.0.1", "localhost", "::1"):
        print("no API key exists yet: only clients on this machine are served, without "
              "a key; create one with: ctxstore keys create --tenant T --scope write",
              file=sys.stderr, flush=True)  # fmt: skip


def cmd_erase(args: argparse.Namespace) -> int:
    from service.erasure import Eraser
    from service.runtime import Runtime

    runtime = Runtime(_url(args))
    try:
        eraser = Eraser(runtime)
        if (args.session_id is None) == (args.tenant is None):
            print("error: invalid_request: name a SESSION_ID or --tenant T, not both",
                  file=sys.stderr)  # fmt: skip
            return 2
        if args.tenant is not None:
            _print_json(eraser.erase_tenant(args.tenant, args.by))
        else:
            _print_json(eraser.erase(args.session_id, args.by))
    finally:
        runtime.close()
    return 0


def _serve(url: str, host: str, port: int, workers: int) -> int:
    import uvicorn

    from domain.tokens import check_tokenizer

    check_tokenizer()  # fail here, with the fix spelled out, not inside a worker
    Policy.from_env()  # likewise a bad CTXSTORE_POLICY
    try:
        Limits.from_env()  # and a bad limit
    except ValueError as exc:
        raise Failed("invalid_setting", str(exc)) from None
    _migrate(url)
    _auth_note(url, host)
    os.environ["CTXSTORE_DATABASE_URL"] = url  # uvicorn workers build the app from env
    os.environ["CTXSTORE_BIND_HOST"] = host  # a Host header the server answers (api.browser_safety)
    uvicorn.run("api.app:create_app", factory=True, host=host, port=port, workers=workers,
                **uvicorn_limits())  # fmt: skip
    return 0


def uvicorn_limits() -> dict[str, Any]:
    """What uvicorn itself bounds: idle keep-alive connections are closed after 5 s, a
    worker takes at most ``CTXSTORE_MAX_CONNECTIONS`` connections and requests at once
    (503 past it), headers are at most 16 KB, and shutdown waits 10 s for open streams.
    The body's size and read time are the app's (api.limits)."""
    raw = os.environ.get("CTXSTORE_MAX_CONNECTIONS", "").strip() or "1000"
    if not raw.isdigit() or int(raw) <= 0:
        raise Failed("invalid_setting", f"CTXSTORE_MAX_CONNECTIONS={raw!r} is not a count")
    return {"timeout_keep_alive": 5, "limit_concurrency": int(raw),
            "h11_max_incomplete_event_size": 16 * 1024,
            "timeout_graceful_shutdown": 10}  # fmt: skip


def cmd_serve(args: argparse.Namespace) -> int:
    return _serve(_url(args), args.host, args.port, args.workers)


def cmd_demo(args: argparse.Namespace) -> int:
    url = _url(args)
    sid, imported = demo.demo_session(url)
    print(("imported the sample session " if imported else "sample session ") + sid)
    base = f"http://{args.host}:{args.port}"
    print(f"database {url}\n\nonce the server is up, open the inspector at\n  "
          f"{demo.inspector_url(base, sid)}\nor try:")  # fmt: skip
    print("\n".join(demo.curl_lines(base, sid)) + "\n", flush=True)
    return _serve(url, args.host, args.port, 1)


# ------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxstore", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, fn: Callable[[argparse.Namespace], int], help: str
                ) -> argparse.ArgumentParser:  # fmt: skip
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--db", metavar="URL", help="database URL (default: "
                       "CTXSTORE_DATABASE_URL, else sqlite:///ctxstore.db)")  # fmt: skip
        p.set_defaults(fn=fn)
        return p

    for name, fn, text in (
        ("serve", cmd_serve, "migrate, then serve the HTTP API"),
        ("demo", cmd_demo, "migrate, import the sample session, serve"),
    ):
        p = command(name, fn, text)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--port", type=int, default=8000)
        if name == "serve":
            p.add_argument("--workers", type=_positive, default=1)
    command("migrate", cmd_migrate, "alembic upgrade head for the projection tables")
    p = command("import", cmd_import, "import a JSONL transcript; prints the session id")
    p.add_argument("file", metavar="FILE.jsonl")
    p.add_argument("--tenant", default=None, help="the tenant that owns the new session "
                   "(default: an export's own, else 'default')")  # fmt: skip
    p = command("export", cmd_export, "a session's events as JSONL, one per line")
    p.add_argument("session_id", metavar="SESSION_ID")
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p = command("replay", cmd_replay, "the session as it stood after event VERSION; with "
                "--render, the request the model was fed then")  # fmt: skip
    p.add_argument("session_id", metavar="SESSION_ID")
    p.add_argument("--to", type=int, required=True, metavar="VERSION")
    p.add_argument(
        "--render",
        choices=("neutral", "openai", "anthropic"),
        default=None,
        help="print the provider request at that event (projected in memory)",
    )
    command("worker", cmd_worker, "keep the projections caught up until Ctrl-C"
            ).add_argument("--interval", type=float, default=0.5)  # fmt: skip
    command("rebuild", cmd_rebuild, "rebuild every projection and compare digests")
    _keys_parser(sub)
    p = command("erase", cmd_erase, "erase a session and its branches for good (stop other "
                "servers and workers first); prints what was erased")  # fmt: skip
    p.add_argument("session_id", metavar="SESSION_ID", nargs="?")
    p.add_argument("--tenant", help="erase every session of this tenant (its keys stay)")
    p.add_argument("--by", default="cli", help="who asked, for the audit record (default: cli)")
    return parser


def _keys_parser(sub: Any) -> None:
    keys = sub.add_parser("keys", help="create, list or revoke API keys",
                          description="create, list or revoke API keys")  # fmt: skip
    keys.set_defaults(fn=cmd_keys)
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    for name, text in (("create", "a new key; prints its secret once"),
                       ("list", "every key (never a secret)"),
                       ("revoke", "a key stops working at once")):  # fmt: skip
        p = actions.add_parser(name, help=text, description=text)
        p.add_argument("--db", metavar="URL", help="database URL (default: "
                       "CTXSTORE_DATABASE_URL, else sqlite:///ctxstore.db)")  # fmt: skip
        if name == "create":
            p.add_argument("--tenant", required=True)
            p.add_argument("--scope", required=True, choices=("read", "write", "admin"))
        elif name == "revoke":
            p.add_argument("key_id", metavar="KEY_ID")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; its exit status.

    0 ok; 1 rebuild digests differ, or the set-up is broken (no tokenizer
    files, database unreachable); 2 bad input (unknown session, bad file).
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse has already printed its usage message
        return exc.code if isinstance(exc.code, int) else 2
    try:
        status: int = args.fn(args)
        return status
    except DomainError as exc:
        return _fail(exc.code, exc.message)
    except Failed as exc:
        return _fail(exc.code, exc.message, exc.status)
    except TokenizerUnavailable as exc:
        return _fail("tokenizer_unavailable", str(exc), 1)
    except InvalidPolicy as exc:
        return _fail(exc.code, str(exc))
    except DATABASE_ERRORS as exc:
        return _fail("database_unavailable", database_error_line(exc), 1)
    except STORE_ERRORS as exc:  # e.g. a --db file that is not a database
        if isinstance(exc, INTEGRITY_ERRORS):
            raise  # a broken invariant is a bug: show the traceback
        return _fail("database_error", database_error_line(exc), 1)
    except BrokenPipeError:
        # The reader went away (``ctxstore export … | head``): stop quietly, and
        # keep the interpreter's final flush from raising the same error again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _fail(code: str, message: str, status: int = 2) -> int:
    print(f"error: {code}: {message}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
