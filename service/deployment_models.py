"""A deployment's own models: ``CTXSTORE_MODELS`` (JSON) and ``CTXSTORE_MODELS_FILE``.

Both hold one JSON object, ``{"provider:model": window}``; the file is read
first and the variable wins.  The built-in table (``domain.catalogue``) is
part of the rules, so a deployment's window never enters a projection
through the back door: when a session starts (or switches) on such a model
without a ``context_window`` of its own, the runtime writes the deployment's
window into the command, and so into the event.  Rebuilding the projections
under another configuration gives the same bytes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from domain import commands
from domain.limits import check_model, check_window

ENV, FILE_ENV = "CTXSTORE_MODELS", "CTXSTORE_MODELS_FILE"


def models_from_env(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """The deployment's windows; ``ValueError`` naming the variable for a bad value."""
    env = os.environ if env is None else env
    models: dict[str, int] = {}
    path = env.get(FILE_ENV)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{FILE_ENV}: cannot read {path}: {exc}") from None
        models.update(_parse(FILE_ENV, text))
    if env.get(ENV):
        models.update(_parse(ENV, env[ENV]))
    return models


def _parse(name: str, text: str) -> dict[str, int]:
    try:
        raw: Any = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{name}: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValueError(f'{name}: must be a JSON object {{"provider:model": window}}')
    out: dict[str, int] = {}
    for model, window in raw.items():
        try:
            check_model(model)
            if isinstance(window, bool) or not isinstance(window, int):
                raise ValueError
            check_window(window)
        except Exception:  # noqa: BLE001 - any refusal is a bad entry, named
            raise ValueError(f"{name}: {model!r}: needs 'provider:model' and a window of "
                             "256..100,000,000 tokens") from None  # fmt: skip
        out[model] = window
    return out


def with_deployment_window(
    command: commands.Command, models: Mapping[str, int]
) -> commands.Command:
    """``command`` with the deployment's window written in, when it names such a model."""
    if not isinstance(command, commands.StartSession | commands.SwitchModel):
        return command
    if command.context_window is not None or command.model not in models:
        return command
    return dataclasses.replace(command, context_window=models[command.model])
