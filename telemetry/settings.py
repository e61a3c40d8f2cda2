"""The telemetry's switches, read from the environment once per process."""

from __future__ import annotations

import os
from collections.abc import Mapping

OFF = ("0", "off", "false", "no")
METRICS_ENV = "CTXSTORE_METRICS"
LOG_FORMAT_ENV = "CTXSTORE_LOG_FORMAT"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def metrics_on(env: Mapping[str, str] | None = None) -> bool:
    """``CTXSTORE_METRICS``: on unless 0/off/false/no."""
    env = os.environ if env is None else env
    return env.get(METRICS_ENV, "on").strip().lower() not in OFF


def json_logs(env: Mapping[str, str] | None = None) -> bool:
    """``CTXSTORE_LOG_FORMAT=json``: one JSON object a line (else uvicorn's plain lines)."""
    env = os.environ if env is None else env
    raw = env.get(LOG_FORMAT_ENV, "").strip().lower()
    if raw not in ("", "plain", "text", "json"):
        raise ValueError(f"{LOG_FORMAT_ENV}={raw!r}: use json or plain")
    return raw == "json"


def multiprocess_dir(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return env.get(MULTIPROC_ENV) or env.get(MULTIPROC_ENV.lower()) or None
