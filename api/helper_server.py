"""A second server of the same app, on a Unix socket, that takes the large bodies.

One large body costs its process about 140 ms of the interpreter lock in all
(receiving, parsing, tokenizing, encoding and storing the event, projecting
the node), much of it in single C calls of 5-20 ms.  In that process every
other request waits behind those calls, whatever the threads: another
session's small append went from 8 ms to 40-55 ms (issue 13).  A process of
its own holds its own lock, so the API process only passes the bytes on
(``api.large_body_lane``) and stays free for the small requests.

The helper is ``api.bootstrap:bootstrap`` with the parent's settings and no
lane of its own.  It is started with the app and stopped with it, started
again by the next large body if it dies (a second after its last start,
doubling while it keeps dying; each exit is logged as it happens), killed
and replaced if it is stuck, and until it takes connections the lane serves
large bodies in the process as before.
It is used on PostgreSQL only: there, any number of processes write and project one store side by
side (README, *Deployment*); SQLite is one process's file.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from domain.store_config import is_postgres

log = logging.getLogger("ctxstore.api")
ROOT = Path(__file__).resolve().parents[1]  # on the helper's import path
LANE_ENV = "CTXSTORE_LARGE_BODY_LANE"
HELPER_ENV = "CTXSTORE_LANE_HELPER"  # set for the helper only: its end of the parent pipe
SECRET_ENV = "CTXSTORE_LANE_SECRET"  # what the API process proves itself with to its helper
SOCKET_ENV = "CTXSTORE_LANE_SOCKET"  # the helper's socket, whose folder it removes at the end
# Not passed to the helper: uvicorn's own options, read from the environment.
NOT_INHERITED = ("UVICORN_", "WEB_CONCURRENCY", "FORWARDED_ALLOW_IPS", HELPER_ENV, SECRET_ENV,
                 SOCKET_ENV)  # fmt: skip
DEFAULT_THRESHOLD = 256 * 1024  # bytes: from here a body's handling costs more than the hop
HELPER_NICENESS = 10
RESPAWN_AFTER = 1.0  # seconds before a dead helper is started again, doubled each time
RESPAWN_MAX = 60.0
HELPER_COMMAND = (sys.executable, "-m", "uvicorn", "api.bootstrap:bootstrap", "--factory",
                  "--uds", "{socket}", "--workers", "1", "--no-proxy-headers",
                  "--lifespan", "on", "--log-level", "warning", "--no-access-log",
                  "--timeout-keep-alive", "5")  # fmt: skip
FAILED_IN_A_ROW = 3  # requests the helper failed in a row before it is replaced


def lane_threshold(env: Mapping[str, str], database_url: str, partitions: int = 2) -> int:
    """Bodies of this many bytes or more go to the helper; 0 when there is no helper.

    ``CTXSTORE_LARGE_BODY_LANE``: a byte count, or 0 for none.  Unset, it is
    ``DEFAULT_THRESHOLD`` on PostgreSQL with ``partitions`` > 1, else 0.  With
    one partition every session's catch-up waits for the large node's
    projection whichever process does it, and the API process often did it
    itself, reading the node back from the table: another session's append
    p99 was 88-93 ms with the lane against 55-60 ms without.
    """
    raw = env.get(LANE_ENV, "").strip()
    if env.get(HELPER_ENV):
        return 0  # a helper has no lane of its own
    postgres = is_postgres(database_url)
    if not raw:
        return DEFAULT_THRESHOLD if postgres and partitions > 1 else 0
    if not raw.isdigit():
        raise ValueError(f"{LANE_ENV}={raw!r} is not a byte count (0 turns the lane off)")
    if int(raw) and not postgres:
        raise ValueError(f"{LANE_ENV}={raw!r}: the large-body lane needs PostgreSQL "
                         "(a SQLite file is written by one process)")  # fmt: skip
    return int(raw)


class HelperServer:
    """The helper process: started on demand, restarted when dead, stopped with the app.

    Everything tied to the process that starts it (its socket folder, the
    pipe whose end tells the helper its parent is gone, the secret) is made
    when it is spawned, in the process that serves: a server that builds the
    app before it forks its workers (gunicorn ``--preload``) gives each
    worker a helper of its own.
    """

    def __init__(self, env: Mapping[str, str], command: Sequence[str] | None = None) -> None:
        """``command``: what runs instead of the helper server (tests)."""
        path = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        # uvicorn reads its own options from the environment: a helper is one
        # process on its socket, whatever the API process was started with.
        self._env = {k: v for k, v in env.items() if not k.startswith(NOT_INHERITED)}
        self._env["PYTHONPATH"] = path
        self._owner = 0  # the pid that made the folder, pipe and secret below
        self._folder = ""
        self.socket = ""
        self.secret = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._command = list(command or HELPER_COMMAND)
        self._alive: int | None = None  # our end of the helper's parent pipe
        self._started = 0.0
        self._failures = 0  # starts in a row that died before they served
        self._failed_requests = 0  # requests in a row the helper failed
        self._served = False  # whether the current helper answered a request
        self.starts = 0  # helpers started: the number of the current one
        # ensure/failed/running run on the event loop, stop in a worker thread
        self._guard = threading.RLock()

    def ensure(self) -> int:
        """Start the helper if it is not running; the number of the one running (to
        pass to ``failed`` or ``running`` about a request sent to it).  One that keeps
        dying is started again ``RESPAWN_AFTER`` seconds after its last start, then
        twice that, and so on up to ``RESPAWN_MAX``; until then large bodies are
        served in the process.  ``OSError``: it could not be started now (the caller
        serves in the process)."""
        with self._guard:
            self._ensure()
            return self.starts

    def _ensure(self) -> None:
        if self._owner != os.getpid():
            self._own()
        proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                return
            self._proc = None
            self._failures += 1  # its exit was logged by its watcher
        wait = min(RESPAWN_MAX, RESPAWN_AFTER * 2 ** max(0, self._failures - 1))
        if self._failures and time.monotonic() - self._started < wait:
            raise OSError(f"the large-body helper is restarted {wait:g} s after its last start")
        self._started = time.monotonic()
        try:
            self._spawn()
        except OSError as exc:  # out of file descriptors or processes, say
            self._failures += 1
            log.warning("the large-body helper could not be started: %s", exc)
            raise

    def _spawn(self) -> None:
        if os.path.exists(self.socket):
            os.unlink(self.socket)  # a dead helper's: the new one binds afresh
        if self._alive is not None:
            os.close(self._alive)
            self._alive = None
        theirs, alive = os.pipe()
        env = {**self._env, HELPER_ENV: str(theirs), SECRET_ENV: self.secret,
               SOCKET_ENV: self.socket}  # fmt: skip
        argv = [arg.replace("{socket}", self.socket) for arg in self._command]
        try:
            proc = subprocess.Popen(argv, cwd=ROOT, env=env, pass_fds=(theirs,))
        except OSError:
            os.close(alive)
            raise
        finally:
            os.close(theirs)
        self._proc, self._alive = proc, alive
        self.starts += 1
        self._failed_requests, self._served = 0, False  # the last one's are not this one's
        try:
            threading.Thread(target=self._watch, args=(proc,), name="ctxstore-lane-watch",
                             daemon=True).start()  # fmt: skip
        except RuntimeError as exc:  # no thread to spare: only the exit's log is lost
            log.warning("the large-body helper's exit will not be logged: %s", exc)

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        """Log the helper's exit when it happens (not when the next large body finds it)."""
        code = proc.wait()
        if self._proc is proc:  # not stopped with the app
            log.warning("the large-body helper (pid %s) exited with %s; a later large "
                        "body starts another", proc.pid, code)  # fmt: skip

    def running(self, helper: int | None = None) -> bool:
        """Whether helper number ``helper`` (None: the current one) served a request and
        is still up (resets the backoff)."""
        with self._guard:
            if helper is not None and helper != self.starts:
                return False  # a request to a helper since replaced
            if self._proc is not None and self._proc.poll() is None:
                self._failures = self._failed_requests = 0
                self._served = True
                return True
            return False

    def failed(self, stuck: bool, helper: int | None = None) -> None:
        """A request to helper number ``helper`` (None: the current one) failed once
        it had it.  A helper that is ``stuck`` (it did not read or answer in time) or
        failed ``FAILED_IN_A_ROW`` requests in a row is killed: left running, each
        large body would wait out its timeouts and end in a 503.  The next large body
        starts another (``ensure``): at once if it had served a request, else after
        the backoff of one that died young (a helper that hangs on every request
        would otherwise make each large body wait out its timeout).  A late failure
        of a helper already replaced says nothing about its replacement, and is not
        counted against it."""
        with self._guard:
            if helper is not None and helper != self.starts:
                return
            self._failed_requests += 1
            proc = self._proc
            if (stuck or self._failed_requests >= FAILED_IN_A_ROW) and proc is not None:
                if proc.poll() is None:
                    log.warning("the large-body helper (pid %s) %s; killing it", proc.pid,
                                "is stuck" if stuck else "failed requests in a row")  # fmt: skip
                    proc.kill()  # reaped by its watcher
                if not self._served:
                    self._failures += 1
                self._proc, self._failed_requests = None, 0

    def _own(self) -> None:
        """Make this process's folder and secret (``_owner`` last: a failed ``mkdtemp``
        is tried again at the next large body)."""
        self._folder = tempfile.mkdtemp(prefix="ctxstore-lane-")
        self.socket = os.path.join(self._folder, "helper.sock")
        self.secret = secrets.token_hex(32)
        self._proc, self._alive = None, None  # a forked parent's are not ours
        self._owner = os.getpid()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """Stop the helper and remove its folder (blocks: up to 15 s for it to exit)."""
        with self._guard:
            if self._owner != os.getpid():
                return  # built here, never started here
            proc, self._proc = self._proc, None
            alive, self._alive = self._alive, None
            folder = self._folder
            self._owner = 0  # the folder goes: a later start makes another
            self._failures = self._failed_requests = 0
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if alive is not None:
            os.close(alive)
        shutil.rmtree(folder, ignore_errors=True)


def become_helper(alive: int, socket: str) -> None:
    """In the helper, at start: yield the CPU to the API process, and stop with it.

    Large bodies are throughput work; the small requests the API process
    serves are what a user waits on.  At niceness ``HELPER_NICENESS`` the
    kernel gives the API process the cores first when both want them (another
    session's append p99 while 8 MB bodies were stored: 18-21 ms at 0, 16-19
    ms at 10, alternating runs of ``scripts/bench_limits.py``).  And once the
    API process is gone (the pipe ``alive`` reads end of file: its end closes
    however it exits, a kill included), the helper removes its socket folder
    and shuts down as on SIGTERM, rather than serve a socket nobody uses.
    """
    os.nice(HELPER_NICENESS)

    def watch() -> None:
        while os.read(alive, 1):
            pass
        shutil.rmtree(os.path.dirname(socket), ignore_errors=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="ctxstore-lane-parent", daemon=True).start()
