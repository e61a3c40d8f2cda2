"""What every ``ctxstore`` subcommand shares: the database URL, the settings, the
runtime or write side it opens, and ``Failed``, the error printed without a traceback.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from eventsourcing import persistence as es_persistence
from sqlalchemy import exc as sa_exc

from domain.application import CtxStore
from domain.policy import InvalidPolicy
from domain.store_config import database_url, eventsourcing_env
from projections.store import database_error_line
from service.settings import Settings

if TYPE_CHECKING:
    from service.runtime import Runtime

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


def _settings(env: Mapping[str, str] | None = None) -> Settings:
    """Every setting, read once per command (from ``env``, else the environment);
    a bad value is ``invalid_setting``."""
    try:
        return Settings.from_env(env)
    except InvalidPolicy:
        raise  # main() reports it as invalid_policy, as before
    except ValueError as exc:
        raise Failed("invalid_setting", str(exc)) from None


def _runtime(args: argparse.Namespace) -> Runtime:
    """A runtime wired from the settings (``service.bootstrap``) on the chosen database."""
    from service.bootstrap import open_runtime  # export and replay never load the projections

    return open_runtime(_settings(), _url(args))


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


def _migrate(url: str) -> int:
    from projections.migrate import upgrade

    return upgrade(url)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))
