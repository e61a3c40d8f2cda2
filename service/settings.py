"""Every setting, read from the environment once, into one frozen value.

The variable names are the README's (*Configuration*); each is parsed and
checked here, so a bad value stops start-up with its name rather than
surfacing at the first request. Nothing reads the environment at import
time, and nothing here writes to it: ``bootstrap`` (``api.bootstrap``)
passes these values to what it builds.

The API's own limits and browser rules keep their parsers next to the code
they bound (``api.limits``, ``api.browser_safety``); they read ``env``, the
snapshot taken here, not ``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType

from domain.idempotency import DEFAULT_TTL, TTL_VARIABLE, ttl_from
from domain.policy import Policy
from domain.store_config import database_url, is_postgres, working_set_budget
from domain.summarizer import Summarizer, summarizer_from_env
from domain.tokens import DEFAULT_ENCODING
from projections.partitions import configured as configured_partitions


@dataclass(frozen=True)
class Settings:
    """What a process needs to run; build with ``Settings.from_env()``."""

    database_url: str
    encoding: str
    tiktoken_cache_dir: str | None
    policy: Policy
    summarizer: Summarizer
    working_set: int
    partitions: int
    env: Mapping[str, str]
    idempotency_ttl: timedelta = DEFAULT_TTL

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read and check every setting from ``env`` (``os.environ`` if None).

        Raises ``InvalidPolicy`` or ``ValueError`` naming the bad variable.
        """
        snapshot = MappingProxyType(dict(os.environ if env is None else env))
        folder = snapshot.get("TIKTOKEN_CACHE_DIR") or snapshot.get("CTXSTORE_TIKTOKEN_CACHE_DIR")
        url = database_url(snapshot)
        return cls(
            database_url=url,
            encoding=snapshot.get("CTXSTORE_ENCODING", DEFAULT_ENCODING),
            tiktoken_cache_dir=os.path.abspath(folder) if folder else None,
            policy=Policy.from_env(snapshot),
            summarizer=summarizer_from_env(snapshot),
            working_set=working_set_budget(snapshot),
            partitions=configured_partitions(snapshot, postgres=is_postgres(url)),
            env=snapshot,
            idempotency_ttl=ttl_from(snapshot.get(TTL_VARIABLE)),
        )
