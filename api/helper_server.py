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
again if it dies (at most once a second), and until it answers the lane
serves large bodies in the process as before.  It is used on PostgreSQL
only: there, any number of processes write and project one store side by
side (README, *Deployment*); SQLite is one process's file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # on the helper's import path
LANE_ENV = "CTXSTORE_LARGE_BODY_LANE"
HELPER_ENV = "CTXSTORE_LANE_HELPER"  # the parent's pid, set for the helper only
DEFAULT_THRESHOLD = 256 * 1024  # bytes: from here a body's handling costs more than the hop
HELPER_NICENESS = 10
RESPAWN_AFTER = 1.0  # seconds between two starts of a helper that keeps dying


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
    postgres = database_url.startswith(("postgresql", "postgres:"))
    if not raw:
        return DEFAULT_THRESHOLD if postgres and partitions > 1 else 0
    if not raw.isdigit():
        raise ValueError(f"{LANE_ENV}={raw!r} is not a byte count (0 turns the lane off)")
    if int(raw) and not postgres:
        raise ValueError(f"{LANE_ENV}={raw!r}: the large-body lane needs PostgreSQL "
                         "(a SQLite file is written by one process)")  # fmt: skip
    return int(raw)


class HelperServer:
    """The helper process: started on demand, restarted when dead, stopped with the app."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._folder = tempfile.mkdtemp(prefix="ctxstore-lane-")
        self.socket = os.path.join(self._folder, "helper.sock")
        path = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self._env = {**env, HELPER_ENV: str(os.getpid()), "PYTHONPATH": path}
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = 0.0
        self.starts = 0

    def ensure(self) -> None:
        """Start the helper if it is not running (not twice within ``RESPAWN_AFTER``)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        if self._proc is not None and time.monotonic() - self._started < RESPAWN_AFTER:
            return
        if os.path.exists(self.socket):
            os.unlink(self.socket)  # a dead helper's: the new one binds afresh
        argv = [sys.executable, "-m", "uvicorn", "api.bootstrap:bootstrap", "--factory",
                "--uds", self.socket, "--log-level", "warning", "--no-access-log",
                "--timeout-keep-alive", "30"]  # fmt: skip
        self._proc = subprocess.Popen(argv, cwd=ROOT, env=self._env)
        self._started = time.monotonic()
        self.starts += 1

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self._folder, ignore_errors=True)


def become_helper(parent: int) -> None:
    """In the helper, at start: yield the CPU to the API process, and stop with it.

    Large bodies are throughput work; the small requests the API process
    serves are what a user waits on.  At niceness ``HELPER_NICENESS`` the
    kernel gives the API process the cores first when both want them (another
    session's append p99 while 8 MB bodies were stored: 18-21 ms at 0, 16-19
    ms at 10, alternating runs of ``scripts/bench_limits.py``).  And once the
    API process is gone, killed with no chance to stop its helper, the helper
    shuts down (as on SIGTERM) rather than serve a socket nobody uses.
    """
    os.nice(HELPER_NICENESS)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="ctxstore-lane-parent", daemon=True).start()
