"""Every constant the context rules use, in one place.

A ``Policy`` is data: the rules read it, never module globals, so a test or
an operator can override any constant and the resulting commits say which
rules made them through ``rules_version`` (a digest of the policy).
Override with ``CTXSTORE_POLICY='{"tail_turns": 5}'`` (JSON).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any


class InvalidPolicy(ValueError):
    """A policy the rules cannot run under; refused when it is made, not mid-projection."""

    code = "invalid_policy"


def _real(value: Any) -> bool:
    """An int or float, but not a bool (JSON true is not a number of turns)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(low: int) -> tuple[str, Any]:
    return f"an integer >= {low}", lambda v: _real(v) and isinstance(v, int) and v >= low


def _number(low: float, high: float, closed_high: bool) -> tuple[str, Any]:
    def ok(v: Any) -> bool:
        if not _real(v):
            return False
        return bool(low < v <= high if closed_high else low <= v < high)

    return (f"a number in ({low:g}, {high:g}]" if closed_high
            else f"a number in [{low:g}, {high:g})"), ok  # fmt: skip


def _optional_int(low: int) -> tuple[str, Any]:
    text, check = _int(low)
    return f"{text} or null", lambda v: v is None or check(v)


# What each value must be.  Checked when a policy is made, so a bad
# CTXSTORE_POLICY stops start-up with its name rather than the projection
# failing on the first event that reaches the rule.
_VALID: dict[str, tuple[str, Any]] = {
    "tail_turns": _int(0),
    "args_cap": _int(1),
    "result_cap": _int(1),
    "protected_tools": ("a list of tool names",
                        lambda v: isinstance(v, tuple) and all(isinstance(n, str) for n in v)),
    "idle_minutes": ("a number > 0", lambda v: _real(v) and v > 0),
    "compact_at": _number(0, 1, closed_high=True),
    "emergency_at": _number(0, 1, closed_high=True),
    "summary_target": _number(0, 1, closed_high=False),
    "output_reserve_fraction": _number(0, 1, closed_high=False),
    "output_reserve_max": _int(0),
    "summary_max_tokens": _optional_int(1),
    "summary_budget": ("a number in (0, 1) or null",
                       lambda v: v is None or (_real(v) and 0 < v < 1)),
    "generation": ("1 or 2", lambda v: v in (1, 2) and not isinstance(v, bool)),
    "batch_trigger": _number(0, 1, closed_high=False),
    "clear_at_least": _int(0),
    "dedup_tool_results": ("true or false", lambda v: isinstance(v, bool)),
    "drop_summarized_tools": ("true or false", lambda v: isinstance(v, bool)),
    "redact_secrets": ("true or false", lambda v: isinstance(v, bool)),
    "recall_tool": ("true or false", lambda v: isinstance(v, bool)),
    "keep_thinking_turns": _optional_int(0),
    "extra": ("an object", lambda v: isinstance(v, dict)),
}  # fmt: skip


@dataclass(frozen=True)
class Policy:
    tail_turns: int = 3
    args_cap: int = 200
    result_cap: int = 4_000
    protected_tools: tuple[str, ...] = ("todo_create", "todo_update", "todo_list", "web_search")
    idle_minutes: float = 60.0
    # Compaction starts when history passes ``compact_at`` of its budget and
    # folds down to ``summary_target``: late and deep, so that each time the
    # request's prefix changes buys many turns that only append to it
    # (``scripts/bench_cache.py`` measures it; 0.80 and 0.50 before).  A fold
    # lands at ``summary_target`` plus its summary (up to ``summary_budget``):
    # about 85% of the history, not a quarter, so the window holds facts
    # (``scripts/bench_retention.py``; 0.25 and a 1,200-character gist, then
    # 0.85 / 0.35 / 0.4, before: the render used 79% of the history limit on
    # average, now 86%, at the same median prefix reuse).
    compact_at: float = 0.92
    emergency_at: float = 0.95
    summary_target: float = 0.4
    # The most one summary request covers (tokens of the items it folds).
    # Compaction then goes in chunks: however far over the threshold a
    # session is (compaction off, or its summarizer down), each commit's
    # request stays this size, and it fits a summarizer's own context.
    summary_max_tokens: int | None = 24_000
    # How much of the history budget one summary may fill (its facts chosen to
    # fit, ``ExtractiveSummarizer.summarize_within``); None: the first-line
    # gist capped at 1,200 characters, as before this field existed.
    summary_budget: float | None = 0.45
    output_reserve_fraction: float = 0.125
    output_reserve_max: int = 16_384
    # Which rules run (see the README's "Rules" section).  Generation 2 keeps
    # the window promise: summaries fold again, merges compact, attaches and
    # merges bring in only what the target lacks, a deterministic fold stands
    # in when no summary can be had.  Rules history recorded before it exists
    # replays under generation 1, so commits saved then are rebuilt as they were.
    generation: int = 2
    # Cache-aware batching (generation 2): aging and idle clearing wait until
    # history passes ``batch_trigger`` of its budget AND they would free at
    # least ``clear_at_least`` tokens, then run all at once, so most requests
    # only append to the one before.  Anything else that rewrites the prefix
    # (a summary, a fold, a retry) takes the pending work along.  0 and 0: off.
    batch_trigger: float = 0.85
    clear_at_least: int = 2_048
    # A tool result equal to an earlier visible one renders as a reference to it.
    dedup_tool_results: bool = True
    # Tool definitions stay listed (and budgeted) after every use of the tool is
    # summarized, so the request's tools, its most stable prefix, never change.
    drop_summarized_tools: bool = False
    # Mask secrets (API keys, tokens, private keys) in items as they enter a
    # commit, so renders, summaries and copies never show them (rules/redact.py).
    redact_secrets: bool = False
    # Thinking (and reasoning) of assistant turns older than the last
    # ``keep_thinking_turns`` is cleared (rules/thinking.py), batched with aging
    # for the cache, as Anthropic's ``clear_thinking`` does; null keeps it all.
    keep_thinking_turns: int | None = 1
    # Every request lists a ``recall`` tool (``domain.tool_specs.RECALL_SPEC``) the
    # model calls to read back folded or cleared content by keywords; the agent
    # runs it (``ctxstore_client.recall_tool``).  Counted in the budget like any tool.
    recall_tool: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, (wanted, check) in _VALID.items():
            value = getattr(self, name)
            if not check(value):
                raise InvalidPolicy(f"policy {name} must be {wanted}, got {value!r}")

    @property
    def rules_version(self) -> str:
        """A digest of the rules; a field at its legacy value leaves it as it was.

        Kept on the (frozen) instance once made: every render and commit asks.
        """
        known: str | None = self.__dict__.get("_rules_version")
        if known is not None:
            return known
        values = {k: v for k, v in asdict(self).items()
                  if k not in ADDED_LATER or v != ADDED_LATER[k]}  # fmt: skip
        blob = json.dumps(values, sort_keys=True)
        known = "r1-" + hashlib.sha256(blob.encode()).hexdigest()[:10]
        self.__dict__["_rules_version"] = known  # not a field: eq, hash and asdict ignore it
        return known

    @property
    def batching(self) -> bool:
        """Aging and clearing wait for a batch worth a cache miss."""
        return self.generation >= 2 and (self.batch_trigger > 0 or self.clear_at_least > 0)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_record(cls, text: str) -> Policy:
        """A policy as the rules history recorded it (``to_json``), complete.

        A field the record lacks did not exist when it was written, so it
        takes the value that reproduces the rules as they ran then, not
        today's default: a rebuild replays old positions under old rules.
        """
        return cls._from_mapping({**ADDED_LATER, **json.loads(text)})

    @classmethod
    def from_json(cls, text: str) -> Policy:
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise InvalidPolicy(f"policy is not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise InvalidPolicy("policy must be a JSON object of rule constants")
        return cls._from_mapping(raw)

    @classmethod
    def _from_mapping(cls, raw: dict[str, Any]) -> Policy:
        """Today's defaults overridden by ``raw``: unknown keys and bad values refused."""
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise InvalidPolicy(f"unknown policy keys: {sorted(unknown)}")
        if isinstance(raw.get("protected_tools"), list):
            raw["protected_tools"] = tuple(raw["protected_tools"])
        return replace(cls(), **raw)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Policy:
        """``CTXSTORE_POLICY`` from ``env`` (``os.environ`` if None), or the defaults."""
        text = (os.environ if env is None else env).get("CTXSTORE_POLICY")
        return cls.from_json(text) if text else cls()


# Fields added after policies were first recorded, with the value under which
# the rules behave as they did before the field existed.
ADDED_LATER: dict[str, Any] = {
    "summary_max_tokens": None,
    "summary_budget": None,
    "generation": 1,
    "batch_trigger": 0.0,
    "clear_at_least": 0,
    "dedup_tool_results": False,
    "drop_summarized_tools": False,
    "redact_secrets": False,
    "keep_thinking_turns": None,
    "recall_tool": False,
}

DEFAULT_POLICY = Policy()
