"""The ``ctxstore`` command line.

    ctxstore serve   [--host 127.0.0.1] [--port 8000] [--workers 1] [--db URL]
    ctxstore demo    [--host] [--port] [--db URL]   # migrate, import the sample, serve
    ctxstore migrate [--db URL]
    ctxstore import  FILE.jsonl [--tenant T] [--db URL]  # prints the new session id
    ctxstore export  SESSION_ID [--db URL] [--out FILE]
    ctxstore replay  SESSION_ID --to VERSION [--render neutral|openai|anthropic] [--db URL]
    ctxstore worker  [--db URL] [--interval 0.5] [--lease 10]  # projections, split by leases
    ctxstore rebuild [--db URL] [--online [--switch-anyway]] [--processes N]
                                                  # exit 1 if digests differ
    ctxstore keys create --tenant T --scope read|write|admin [--db URL]  # prints the secret once
    ctxstore keys list   [--db URL]
    ctxstore keys revoke KEY_ID [--db URL]
    ctxstore erase   SESSION_ID [--db URL] [--by NAME] # erase it (and its branches) for good
    ctxstore erase   --tenant T [--db URL] [--by NAME] # every session of tenant T
    ctxstore erase   --expired-keys [--db URL]         # idempotency keys past their TTL

``--db`` defaults to ``CTXSTORE_DATABASE_URL`` (else ``sqlite:///ctxstore.db``).

Transcripts are JSONL, one command a line after a ``session`` line; the format
is documented in ``scripts/transcript.py``.  Exports are JSONL too, one event a
line with sorted keys, so exporting the same session twice gives the same bytes.

Expected failures (unknown session, bad transcript, bad URL) print
``error: <code>: <message>`` and exit 2; only bugs show a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from domain.errors import DomainError
from domain.policy import InvalidPolicy
from domain.render import SHAPES
from domain.tokens import TokenizerUnavailable
from projections.store import DATABASE_ERRORS, database_error_line
from scripts import transcript
from scripts.cli_common import (
    INTEGRITY_ERRORS,
    STORE_ERRORS,
    Failed,
    _migrate,
    _print_json,
    _runtime,
    _url,
)
from scripts.cli_read import cmd_export, cmd_replay
from scripts.cli_serve import cmd_demo, cmd_keys, cmd_serve
from scripts.progress import Progress

# ---------------------------------------------------------------- commands


def cmd_migrate(args: argparse.Namespace) -> int:
    swept = _migrate(_url(args))
    print(f"migrated {_url(args)}" + (f"; swept {swept} orphaned payload(s)" if swept else ""))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    print(transcript.import_file(_url(args), args.file, args.tenant))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from projections.leases import Leases
    from projections.tracking import PartitionCountChanged

    runtime = _runtime(args)
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    leases = Leases(runtime.store, owner, runtime.processor.partitions, args.lease)
    stopping: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    print(f"worker {owner}: projecting {_url(args)} every {args.interval}s (Ctrl-C stops)",
          flush=True)  # fmt: skip
    backoff = 0.0
    held: list[int] = []
    try:
        while not stopping:
            try:
                now = leases.renew()  # a dead worker's partitions, once its leases expire
                if now != held:
                    print(f"worker: holds partitions {now}", flush=True)
                held = now
                count = runtime.catch_up(partitions=held)
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
    except PartitionCountChanged as exc:  # its supervisor starts it again, split anew
        print(f"error: {exc.code}: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        try:
            leases.release()  # the others need not wait out the leases
        except DATABASE_ERRORS:
            pass
        runtime.close()
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from projections.rebuild import rebuild_and_compare

    url = _url(args)
    _migrate(url)
    if args.online:
        return _rebuild_online(url, args.switch_anyway, args.processes)
    with Progress("rebuild", None, "events") as bar:
        result = rebuild_and_compare(url, progress=_reported(bar), processes=args.processes)
    _print_json(result)
    if "partitions" in result:
        split = result["partitions"]
        print(f"sessions are now split into {split['after']} partitions (were {split['before']}): "
              "restart every server and worker", file=sys.stderr)  # fmt: skip
    return 0 if result.get("identical") else 1


def _reported(bar: Progress) -> Callable[[int, int], None]:
    """The rebuild's progress on the bar and in the rebuild gauges (``telemetry.probes``;
    a server scrapes them when this process shares its ``PROMETHEUS_MULTIPROC_DIR``)."""
    from telemetry import probes

    def report(done: int, total: int) -> None:
        bar.update(done, total)
        probes.rebuild_progress(done, total)

    return report


def _rebuild_online(url: str, switch_anyway: bool, processes: int) -> int:
    from dataclasses import asdict

    from projections.online_rebuild import SwitchRefused, online_rebuild

    try:
        with Progress("rebuild", None, "events") as bar:
            result = online_rebuild(url, progress=_reported(bar),
                                    expect_identical=not switch_anyway,
                                    processes=processes)  # fmt: skip
    except SwitchRefused as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 1
    _print_json(asdict(result))
    return 0 if result.identical else 1


def cmd_erase(args: argparse.Namespace) -> int:
    from service.erasure import Eraser
    from service.key_expiry import forget_expired_keys

    runtime = _runtime(args)
    try:
        eraser = Eraser(runtime)
        named = [args.session_id is not None, args.tenant is not None, args.expired_keys]
        if named.count(True) != 1:
            print("error: invalid_request: name one of SESSION_ID, --tenant T, --expired-keys",
                  file=sys.stderr)  # fmt: skip
            return 2
        if args.expired_keys:
            _print_json(forget_expired_keys(runtime))
        elif args.tenant is not None:
            _print_json(eraser.erase_tenant(args.tenant, args.by))
        else:
            _print_json(eraser.erase(args.session_id, args.by))
    finally:
        runtime.close()
    return 0


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
        ("demo", cmd_demo, "migrate, import the sample session (with a branch it attaches), serve"),
    ):
        p = command(name, fn, text)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--port", type=int, default=8000)
        if name == "serve":
            p.add_argument("--workers", type=_positive, default=1)
    command("migrate", cmd_migrate, "create every table (the event store's too), migrate the "
            "projection tables to alembic's head and sweep orphaned payloads")  # fmt: skip
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
        choices=SHAPES,
        default=None,
        help="print the provider request at that event (projected in memory)",
    )
    p = command("worker", cmd_worker, "keep the projections caught up until Ctrl-C; workers "
                "split the partitions by leases")  # fmt: skip
    p.add_argument("--interval", type=float, default=0.5)
    p.add_argument("--lease", type=float, default=10.0,
                   help="seconds a worker's partitions stay its own without renewal")  # fmt: skip
    p = command("rebuild", cmd_rebuild, "rebuild every projection and compare digests")
    p.add_argument("--online", action="store_true", help="rebuild beside the live tables "
                   "while servers run, then switch if the digests agree")  # fmt: skip
    p.add_argument("--switch-anyway", action="store_true", help="with --online: switch even "
                   "if the digests differ (a repair, or a new projection format)")  # fmt: skip
    p.add_argument("--processes", type=_positive, default=1, help="project the partitions in "
                   "this many processes (PostgreSQL, CTXSTORE_PARTITIONS > 1)")  # fmt: skip
    _keys_parser(sub)
    p = command("erase", cmd_erase, "erase a session and its branches for good (stop other "
                "servers and workers first); prints what was erased")  # fmt: skip
    p.add_argument("session_id", metavar="SESSION_ID", nargs="?")
    p.add_argument("--tenant", help="erase every session of this tenant (its keys stay)")
    p.add_argument("--expired-keys", action="store_true", help="delete the idempotency keys "
                   "older than CTXSTORE_IDEMPOTENCY_TTL (an erasure does so too)")  # fmt: skip
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
