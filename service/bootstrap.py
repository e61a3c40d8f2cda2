"""Wire a ``Runtime`` from ``Settings``: tokenizer, stores, policy, summarizer.

One place builds the service from the settings, so the server, the worker
and the CLI count with the same encoding, apply the same policy and call the
same summarizer, without any of them reading the environment on its own.
"""

from __future__ import annotations

from typing import Any

from domain import tokens
from service.deployment_models import models_from_env
from service.runtime import Runtime
from service.settings import Settings


def open_runtime(settings: Settings, url: str | None = None, **options: Any) -> Runtime:
    """A runtime on ``url`` (default ``settings.database_url``); the caller closes it.

    ``options`` are ``Runtime``'s own (``auto_catch_up``, ``migrate``...).
    """
    tokens.configure(settings.encoding, settings.tiktoken_cache_dir)
    return Runtime(
        url or settings.database_url,
        policy=settings.policy,
        summarizer=settings.summarizer,
        working_set=settings.working_set,
        partitions=settings.partitions,
        idempotency_ttl=settings.idempotency_ttl,
        models=models_from_env(settings.env),
        **options,
    )
