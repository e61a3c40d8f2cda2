"""The model catalogue: ``provider:model`` -> context window in tokens.

One table for the whole system, so occupancy and budgets agree.  A session's
own ``context_window`` override always wins; an unknown model falls back to
``DEFAULT_WINDOW`` and says so.
"""

from __future__ import annotations

DEFAULT_WINDOW = 128_000

CONTEXT_WINDOWS: dict[str, int] = {
    "openai:gpt-4o": 128_000,
    "openai:gpt-4o-mini": 128_000,
    "openai:gpt-4.1": 1_047_576,
    "openai:o3": 200_000,
    "openai:gpt-5": 400_000,
    "anthropic:claude-3-5-sonnet": 200_000,
    "anthropic:claude-sonnet-4": 200_000,
    "anthropic:claude-opus-4": 200_000,
    "anthropic:claude-haiku-4": 200_000,
    "google:gemini-2.5-pro": 1_048_576,
    "local:tiny": 8_192,
}


def window_for(model: str, override: int | None = None) -> tuple[int, str]:
    """The window and where it came from: ``override``, ``catalogue`` or ``default``."""
    if override:
        return override, "override"
    if model in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[model], "catalogue"
    return DEFAULT_WINDOW, "default"


def window_warnings(model: str, override: int | None = None) -> list[str]:
    """What an answer that used the window says about it: a guessed window is named."""
    window, source = window_for(model, override)
    if source != "default":
        return []
    return [f"unknown model {model!r}: assumed a context window of {window:,} tokens "
            "(start the session with context_window, or add the model to the deployment's "
            "CTXSTORE_MODELS)"]  # fmt: skip
