"""``ctxstore serve``, ``demo`` and ``keys``: the server's start-up checks, its API keys."""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from api.helper_server import lane_threshold
from api.limits import Limits
from api.routes_ops import Operations
from scripts import demo
from scripts.cli_common import Failed, _migrate, _reachable, _settings, _url
from telemetry.settings import MULTIPROC_ENV, metrics_on, multiprocess_dir

ROOT = Path(__file__).resolve().parents[1]  # on the workers' import path


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


def _serve(url: str, host: str, port: int, workers: int) -> int:
    import uvicorn

    from domain.tokens import check_tokenizer

    check_tokenizer()  # fail here, with the fix spelled out, not inside a worker
    # The served app's environment: this one, with the database and a Host header it
    # answers (api.browser_safety); handed to what serves, never written to os.environ.
    env = {**os.environ, "CTXSTORE_DATABASE_URL": url, "CTXSTORE_BIND_HOST": host}
    try:
        Limits.from_env(env)  # a bad limit
        Operations.from_env(env)  # or metrics, readiness or log setting
        helper = lane_threshold(env, url)  # and a large-body lane SQLite cannot have
    except ValueError as exc:
        raise Failed("invalid_setting", str(exc)) from None
    made = _metrics_folder(env, workers > 1 or helper > 0)
    settings = _settings(env)  # likewise a bad CTXSTORE_POLICY or summarizer
    _migrate(url)
    _auth_note(url, host)
    if workers > 1:
        return _exec_workers(env, host, port, workers)
    from api.bootstrap import bootstrap

    if made:  # this process serves too: its metrics go to the folder (telemetry's doc)
        os.environ[MULTIPROC_ENV] = made
    try:
        uvicorn.run(functools.partial(bootstrap, settings), factory=True, host=host, port=port,
                    **uvicorn_limits())  # fmt: skip
    finally:
        if made:
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(made, ignore_errors=True)
    return 0


def _metrics_folder(env: dict[str, str], processes: bool) -> str | None:
    """With several serving processes (workers, the large-body helper), ``/metrics`` sums
    theirs from files in ``PROMETHEUS_MULTIPROC_DIR``: a fresh folder is made for this
    server unless one is set (empty it before each start) or metrics are off."""
    if not processes or multiprocess_dir(env) or not metrics_on(env):
        return None
    made = tempfile.mkdtemp(prefix="ctxstore-metrics-")
    env[MULTIPROC_ENV] = made
    return made


def _exec_workers(env: dict[str, str], host: str, port: int, workers: int) -> int:
    """Become ``uvicorn --workers N`` with ``env`` as the environment.

    uvicorn's worker processes import the app by name (``api.bootstrap:bootstrap``),
    and each reads its settings from its own environment, which is its parent's:
    replacing this process (``os.execve``) gives them ``env`` without writing the
    URL and host into this process's ``os.environ``.
    """
    argv = [sys.executable, "-m", "uvicorn", "api.bootstrap:bootstrap", "--factory",
            "--host", host, "--port", str(port), "--workers", str(workers)]  # fmt: skip
    argv += [f"--{name.replace('_', '-')}={value}" for name, value in uvicorn_limits().items()]
    path = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, {**env, "PYTHONPATH": path})
    return 0  # not reached: execve returns only by raising


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
