"""What a provider measured for one request, read in that provider's own terms.

Providers count a prompt differently, and adding their fields up the same
way double-counts one of them:

* OpenAI (Chat Completions ``prompt_tokens``, Responses ``input_tokens``)
  counts the whole prompt; ``cached_tokens`` (under ``prompt_tokens_details``
  or ``input_tokens_details``) is the part of it served from the cache.
* Anthropic's ``input_tokens`` is only the part after the last cache
  breakpoint; ``cache_read_input_tokens`` and ``cache_creation_input_tokens``
  are the rest of the prompt.

Every report is therefore kept as given (``native``) and normalised once,
when it is recorded, to disjoint parts: ``input_tokens`` (not from the
cache), ``cache_read``, ``cache_creation``; the prompt the request occupied
(``total_input``) is their sum, whatever the provider.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain import errors
from domain.limits import MAX_COUNT, check_count, check_json

MAX_NATIVE = 10_000  # characters of a usage object's JSON: providers send a few hundred
CONVENTIONS = ("openai", "anthropic", "flat")
# Providers whose ``input_tokens`` counts the whole prompt (OpenAI's Responses API
# and compatible servers) or only the uncached part (Anthropic's Messages API).
WHOLE_PROMPT = frozenset({"openai", "azure"})
AFTER_CACHE = frozenset({"anthropic"})


@dataclass(frozen=True)
class Measured:
    convention: str  # openai | anthropic | flat (ctxstore's own fields)
    input_tokens: int  # the prompt's tokens not read from or written to the cache
    cache_read: int
    cache_creation: int
    output_tokens: int

    @property
    def total_input(self) -> int:
        """The whole prompt: what the request occupied of the context window."""
        return self.input_tokens + self.cache_read + self.cache_creation


def from_fields(
    input_tokens: int, cache_read: int = 0, cache_creation: int = 0, output_tokens: int = 0
) -> Measured:
    """ctxstore's own flat fields: already disjoint (input excludes both cache parts)."""
    for field, value in (("input_tokens", input_tokens), ("cache_read", cache_read),
                         ("cache_creation", cache_creation),
                         ("output_tokens", output_tokens)):  # fmt: skip
        check_count(field, value)
    measured = Measured("flat", input_tokens, cache_read, cache_creation, output_tokens)
    _check_total(measured)
    return measured


def from_native(usage: Mapping[str, Any], provider: str) -> Measured:
    """A provider's ``usage`` object as it came back, read by its own convention.

    The convention is told by the fields (``prompt_tokens``, the Anthropic
    cache fields, ``input_tokens_details``); a bare ``input_tokens`` /
    ``output_tokens`` pair is read by ``provider``.
    """
    if not isinstance(usage, Mapping) or not usage:
        raise errors.InvalidCommand("usage must be the provider's usage object", field="usage")
    check_json("usage", usage)
    if len(json.dumps(usage)) > MAX_NATIVE:
        raise errors.InvalidCommand(f"usage is over {MAX_NATIVE:,} characters", field="usage")
    if "prompt_tokens" in usage:
        return _openai(usage, "prompt_tokens", "prompt_tokens_details", "completion_tokens")
    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
        return _anthropic(usage)
    if "input_tokens_details" in usage:
        return _openai(usage, "input_tokens", "input_tokens_details", "output_tokens")
    if "input_tokens" in usage:
        if provider in AFTER_CACHE:
            return _anthropic(usage)
        if provider in WHOLE_PROMPT:
            return _openai(usage, "input_tokens", "input_tokens_details", "output_tokens")
        raise errors.InvalidCommand(
            f"cannot tell whether {provider!r} counts cached tokens in input_tokens: send its "
            "cache fields too, or provider 'openai' or 'anthropic'", field="usage")  # fmt: skip
    raise errors.InvalidCommand("usage has neither prompt_tokens nor input_tokens",
                                field="usage")  # fmt: skip


def _count(usage: Mapping[str, Any], key: str, required: bool = False) -> int:
    value = usage.get(key)
    if value is None:  # Anthropic sends null cache fields when caching is off
        if required:
            raise errors.InvalidCommand(f"usage needs {key}", field=f"usage.{key}")
        return 0
    check_count(f"usage.{key}", value)
    return int(value)


def _openai(usage: Mapping[str, Any], prompt_key: str, details_key: str, output_key: str
            ) -> Measured:  # fmt: skip
    prompt = _count(usage, prompt_key, required=True)
    details = usage.get(details_key) or {}
    if not isinstance(details, Mapping):
        raise errors.InvalidCommand(f"usage.{details_key} must be an object",
                                    field=f"usage.{details_key}")  # fmt: skip
    # ``cached_tokens`` at the top level too: a client that flattened the details
    cached = _count(details, "cached_tokens") or _count(usage, "cached_tokens")
    if cached > prompt:
        raise errors.InvalidCommand(f"cached_tokens ({cached}) exceeds {prompt_key} ({prompt}), "
                                    "which includes them", field="usage")  # fmt: skip
    return Measured("openai", prompt - cached, cached, 0, _count(usage, output_key))


def _anthropic(usage: Mapping[str, Any]) -> Measured:
    measured = Measured(
        "anthropic", _count(usage, "input_tokens", required=True),
        _count(usage, "cache_read_input_tokens"), _count(usage, "cache_creation_input_tokens"),
        _count(usage, "output_tokens"),
    )  # fmt: skip
    _check_total(measured)
    return measured


def _check_total(measured: Measured) -> None:
    if measured.total_input > MAX_COUNT:
        raise errors.InvalidCommand(f"the prompt's tokens add up to more than {MAX_COUNT:,}",
                                    field="usage")  # fmt: skip
