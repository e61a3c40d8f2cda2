"""Which event store to use, from one URL.

``CTXSTORE_DATABASE_URL`` picks the store: ``sqlite:///path.db`` (the
default is ``sqlite:///ctxstore.db``) or ``postgresql://user@host:port/db``.
The eventsourcing library's own variables (``PERSISTENCE_MODULE``,
``SQLITE_DBNAME``, ``POSTGRES_*``) still win when set, so an operator who
already configures eventsourcing directly loses nothing.  The projections use
the same URL, so one database holds the log and its read models.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

DEFAULT_URL = "sqlite:///ctxstore.db"
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
# eventsourcing's PostgreSQL recorder hangs on large events (projections.pg_events).
PG_RECORDER_TOPIC = "projections.pg_events:UnpipelinedRecorder"


def database_url(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if "CTXSTORE_DATABASE_URL" in env:
        return env["CTXSTORE_DATABASE_URL"]
    if env.get("PERSISTENCE_MODULE") == "eventsourcing.postgres":
        user = env.get("POSTGRES_USER", "postgres")
        password = env.get("POSTGRES_PASSWORD", "")
        auth = f"{user}:{password}" if password else user
        host = env.get("POSTGRES_HOST", "127.0.0.1")
        port = env.get("POSTGRES_PORT", "5432")
        return f"postgresql://{auth}@{host}:{port}/{env.get('POSTGRES_DBNAME', 'ctxstore')}"
    if env.get("PERSISTENCE_MODULE") == "eventsourcing.sqlite" and "SQLITE_DBNAME" in env:
        return f"sqlite:///{env['SQLITE_DBNAME']}"
    return DEFAULT_URL


WORKING_SET = 200_000  # nodes a process holds before the least recently used sessions go


def working_set_budget(env: Mapping[str, str] | None = None) -> int:
    """``CTXSTORE_WORKING_SET``: nodes held in memory per process (0: the whole store)."""
    env = os.environ if env is None else env
    text = env.get("CTXSTORE_WORKING_SET", "").strip()
    if not text:
        return WORKING_SET
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"CTXSTORE_WORKING_SET must be a whole number of nodes >= 0, not {text!r}")
    return value


def eventsourcing_env(url: str) -> dict[str, str]:
    """Translate a database URL into the eventsourcing environment."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else parsed.path
        if not path or path == ":memory:":
            # The events and the projections would each get a private in-memory
            # database, so nothing written could ever be read back.
            raise ValueError(f"database URL {url!r} names no file: use sqlite:///path.db")
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": path,
            "SQLITE_LOCK_TIMEOUT": "30",
        }
    if parsed.scheme in POSTGRES_SCHEMES:
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": parsed.path.lstrip("/") or "ctxstore",
            "POSTGRES_HOST": parsed.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(parsed.port or 5432),
            "POSTGRES_USER": unquote(parsed.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(parsed.password or ""),
        }
        return env
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:/// or postgresql://")


def is_postgres(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database (else it is a SQLite file)."""
    return urlparse(url).scheme in POSTGRES_SCHEMES


def sqlalchemy_url(url: str) -> str:
    """The same database, spelled for SQLAlchemy with the psycopg 3 driver."""
    parsed = urlparse(url)
    if parsed.scheme in ("postgresql", "postgres"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url
