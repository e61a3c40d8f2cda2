"""PostgreSQL for the tests, wherever they run.

Why: the README's test command must pass on a fresh machine whose PostgreSQL is installed but
not running, and still run (on SQLite alone, saying so in one line) where it is not installed.
So, once the tests to run are known and some of them need PostgreSQL:

- something answers at ``CTXSTORE_TEST_PG_URL`` (default 127.0.0.1:5432, user ``postgres``,
  trust auth): the tests use it;
- else the installed binaries (``/usr/lib/postgresql/*/bin``) make a throwaway cluster in a
  temporary folder on a free loopback port, the tests use it (``CTXSTORE_TEST_PG_URL`` is set
  to it, so servers and scripts the tests start use it too), and it is removed afterwards.
  PostgreSQL refuses to run as root: as root it runs as the ``postgres`` OS user (``runuser``);
- else the PostgreSQL tests are left out with one line saying why, unless
  ``CTXSTORE_REQUIRE_POSTGRES=1`` (``.ci/run``), which makes it an error.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BIN_GLOB_ROOT = Path("/usr/lib/postgresql")


class Unavailable(Exception):
    """No PostgreSQL for the tests, and why (one line)."""


def admin_url() -> str:
    """The admin connection tests create and drop their databases over (read each time: a
    throwaway cluster sets it once the tests are collected)."""
    return os.environ.get("CTXSTORE_TEST_PG_URL", DEFAULT_ADMIN_URL)


def required() -> bool:
    return os.environ.get("CTXSTORE_REQUIRE_POSTGRES", "") == "1"


def answers(url: str) -> bool:
    """Whether a PostgreSQL server takes a connection at ``url`` (within a few seconds)."""
    import psycopg

    try:
        with psycopg.connect(url.replace("+psycopg", ""), connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin folder holding ``initdb`` and ``pg_ctl``."""
    found = [
        d
        for d in BIN_GLOB_ROOT.glob("*/bin")
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file()
    ]

    def version(d: Path) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", d.parent.name)) or (0,)

    return max(found, key=version) if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    """A throwaway cluster: its folder, its binaries, the user it runs as, its admin URL."""

    folder: Path
    bin: Path
    prefix: list[str]
    url: str

    def stop(self) -> None:
        subprocess.run(
            [*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"),
             "-m", "immediate", "-w", "stop"],
            capture_output=True, check=False,
        )  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)


def _run_as() -> tuple[list[str], int | None, int | None]:
    """The command prefix that runs a binary as a non-root user, and that user's ids."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise Unavailable("running as root and there is no 'postgres' OS user to run it") from None
    runuser = shutil.which("runuser")
    if runuser is None:
        raise Unavailable("running as root and there is no runuser to run it as 'postgres'")
    return [runuser, "-u", "postgres", "--"], user.pw_uid, user.pw_gid


def start_cluster() -> Cluster:
    """Make and start a throwaway cluster; raises ``Unavailable`` saying why it cannot."""
    bin_dir = binaries()
    if bin_dir is None:
        raise Unavailable(f"PostgreSQL is not installed (no initdb under {BIN_GLOB_ROOT}/*/bin)")
    prefix, uid, gid = _run_as()
    folder = Path(tempfile.mkdtemp(prefix="ctxstore-test-pg-"))
    if uid is not None and gid is not None:
        os.chown(folder, uid, gid)
    port = _free_port()
    cluster = Cluster(folder, bin_dir, prefix, f"postgresql://postgres@127.0.0.1:{port}/postgres")
    data = folder / "data"
    steps = [
        [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
         "-E", "UTF8", "--no-sync", "--no-instructions"],
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-t", "60",
         "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
               "-c max_connections=200 -c autovacuum=off", "start"],
    ]  # fmt: skip
    for step in steps:
        done = subprocess.run([*prefix, *step], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            cluster.stop()
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise Unavailable(f"{Path(step[0]).name} failed: {last[0]}")
    return cluster
