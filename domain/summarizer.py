"""Summarizers: turn a run of commit items into one summary text.

A summarizer is called only when a compaction is *recorded*; its answer is
frozen into a ``SummaryRecorded`` event, so replaying the log never calls it
again.  ``ExtractiveSummarizer`` is the offline, deterministic default; the LLM
ones (``domain.llm_summarizer``) ask a server that speaks the OpenAI
``/chat/completions`` protocol or Anthropic's ``/v1/messages``.
``summarizer_from_env`` picks one from ``CTXSTORE_SUMMARIZER*`` variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from domain.gist import first_line_gist, first_sentence_gist
from domain.llm_summarizer import ANTHROPIC_URL, AnthropicSummarizer, OpenAICompatibleSummarizer
from domain.llm_summarizer import SummarizerError as SummarizerError

Items = list[dict[str, Any]]

DEFAULT_MAX_CHARS = 1200
MAX_LINE_CHARS = 160  # one item never crowds out the others
ROLE_ORDER = {"user": 0, "assistant": 1, "tool": 2}


@runtime_checkable
class Summarizer(Protocol):
    """Anything with a ``name`` and ``summarize(items) -> str``.

    ``items`` are commit items (dicts with at least ``role``, ``name`` and
    ``rendered``).  ``name`` is recorded with the summary, so it should say
    which summarizer and, for an LLM, which model wrote it.
    """

    name: str

    def summarize(self, items: Items) -> str: ...


@runtime_checkable
class BudgetedSummarizer(Protocol):
    """A summarizer that fills a given budget (tokens) rather than its own cap."""

    name: str

    def summarize_within(self, items: Items, max_tokens: int) -> str: ...


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class ExtractiveSummarizer:
    """Deterministic, offline: the gist of each item, one line each.

    User and assistant items contribute their first sentence, tool items
    ``name: first line of the result``; other items (system, summaries,
    markers) their first line.  The first line of the answer says what it
    covers; the whole answer is capped at ``max_chars``.
    """

    name = "extractive"

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        if max_chars < 40:
            raise ValueError("max_chars must be at least 40")
        self.max_chars = max_chars

    def summarize(self, items: Items) -> str:
        counts: dict[str, int] = {}
        lines: list[str] = []
        for item in items:
            role = str(item.get("role") or "item")
            counts[role] = counts.get(role, 0) + 1
            rendered = item.get("rendered")
            if role == "summary":  # a summary being folded again: its own lines carry on
                lines.extend(line for line in str(rendered or "").splitlines()
                             if line.startswith("- "))  # fmt: skip
                continue
            if role == "tool":
                line = first_line_gist(rendered, MAX_LINE_CHARS)
                tool = str(item.get("name") or "tool")
                gist = f"{tool}: {line}" if line else tool
            elif role in ("user", "assistant"):
                gist = first_sentence_gist(rendered, MAX_LINE_CHARS)
            else:
                gist = first_line_gist(rendered, MAX_LINE_CHARS)
            if gist:
                lines.append(f"- {role}: {_clip(gist)}")
        order = sorted(counts, key=lambda r: (ROLE_ORDER.get(r, len(ROLE_ORDER)), r))
        parts = ", ".join(f"{counts[role]} {role}" for role in order)
        header = f"Summary of {_plural(len(items), 'item')}" + (f": {parts}." if parts else ".")
        return _cap([header, *lines], self.max_chars)

    def summarize_within(self, items: Items, max_tokens: int) -> str:
        """The facts of ``items`` within ``max_tokens``: the most informative
        sentences, lines and tool digests (``domain.fact_select``), in order."""
        from domain.fact_select import summarize_facts
        from domain.tokens import count_tokens

        counts: dict[str, int] = {}
        for item in items:
            role = str(item.get("role") or "item")
            counts[role] = counts.get(role, 0) + 1
        order = sorted(counts, key=lambda r: (ROLE_ORDER.get(r, len(ROLE_ORDER)), r))
        parts = ", ".join(f"{counts[role]} {role}" for role in order)
        header = f"Summary of {_plural(len(items), 'item')}" + (f": {parts}." if parts else ".")
        return summarize_facts(items, max_tokens, header, count_tokens)


def _cap(lines: list[str], max_chars: int) -> str:
    """The header and the latest whole lines up to ``max_chars``; say how many went.

    The latest, because a summary that folds an earlier summary lists that
    one's lines first: keeping the first lines would keep the oldest forever
    and never take in anything new.
    """
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    header, body = lines[0], lines[1:]
    kept: list[str] = []
    for line in reversed(body):
        marker = f"[... {len(body) - len(kept) - 1} earlier]"
        if len("\n".join([header, marker, line, *kept])) > max_chars:
            break
        kept.insert(0, line)
    marker = f"[... {len(body) - len(kept)} earlier]"
    return "\n".join([header, marker, *kept])[:max_chars]


def _clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def for_session(summarizer: Summarizer, compaction: Mapping[str, Any] | None) -> Summarizer:
    """``summarizer`` as a session configured it (``CompactionConfigured``).

    A summarizer without ``for_session`` (the offline one: it follows no
    instructions and has no model) is used as it is.
    """
    configure = getattr(summarizer, "for_session", None)
    if configure is None or not compaction:
        return summarizer
    if compaction.get("instructions") is None and compaction.get("summarizer_model") is None:
        return summarizer
    configured: Summarizer = configure(compaction.get("instructions"),
                                       compaction.get("summarizer_model"))  # fmt: skip
    return configured


def summarizer_from_env(env: Mapping[str, str] | None = None) -> Summarizer:
    """``CTXSTORE_SUMMARIZER=extractive`` (default), ``openai`` or ``anthropic``.

    An LLM one reads ``CTXSTORE_SUMMARIZER_MODEL``, ``CTXSTORE_SUMMARIZER_URL``
    (required for ``openai``; ``anthropic`` defaults to Anthropic's own) and
    optionally ``CTXSTORE_SUMMARIZER_API_KEY``.
    """
    env = os.environ if env is None else env
    kind = (env.get("CTXSTORE_SUMMARIZER") or "extractive").strip().lower()
    if kind == "extractive":
        return ExtractiveSummarizer()
    if kind not in ("openai", "anthropic"):
        raise ValueError("CTXSTORE_SUMMARIZER must be 'extractive', 'openai' or 'anthropic', "
                         f"not {kind!r}")  # fmt: skip
    default_url = ANTHROPIC_URL if kind == "anthropic" else ""
    url = env.get("CTXSTORE_SUMMARIZER_URL", "").strip() or default_url
    model = env.get("CTXSTORE_SUMMARIZER_MODEL", "").strip()
    missing = [name for name, value in (("URL", url), ("MODEL", model)) if not value]
    if missing:
        needs = " and ".join(f"CTXSTORE_SUMMARIZER_{name}" for name in missing)
        raise ValueError(f"CTXSTORE_SUMMARIZER={kind} needs {needs}")
    api_key = env.get("CTXSTORE_SUMMARIZER_API_KEY") or None
    cls = AnthropicSummarizer if kind == "anthropic" else OpenAICompatibleSummarizer
    return cls(url, model, api_key)
