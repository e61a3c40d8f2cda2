"""LLM summarizers: one structured prompt, two wire protocols.

Both ask a model for the same headed sections (``SECTIONS``) and to keep
names, numbers, dates, identifiers, paths and commands with their exit
status verbatim, so a later turn can still quote them.  A session's own
``instructions`` (``POST /sessions/{sid}/compaction``) are *added* after
that prompt, never put in its place.  ``OpenAICompatibleSummarizer`` speaks
``/chat/completions``; ``AnthropicSummarizer`` speaks Anthropic's
``/v1/messages``.  Either raises ``SummarizerError`` on an HTTP error, a
timeout or an empty answer; the caller falls back and counts it
(``service.compaction.summarize``).  The answer reaches projections only
through the ``SummaryRecorded`` event that freezes it.
"""

from __future__ import annotations

import logging
from typing import Any, Self

import httpx

Items = list[dict[str, Any]]

log = logging.getLogger("ctxstore.summarizer")

SECTIONS = ("Goal", "Decisions", "Facts", "Files and artifacts", "Errors", "Open tasks")

SYSTEM_PROMPT = (
    "You compress part of an AI agent's conversation so the agent can keep working "
    "with less context. Summarize the transcript you are given under exactly these "
    "headed sections, in this order, each heading on a line of its own:\n\n"
    + "\n".join(f"## {section}" for section in SECTIONS)
    + "\n\nGoal: what the user wants done. Decisions: what was chosen, and why. "
    "Facts: what was learned. Files and artifacts: files, URLs and other things "
    "created, read or changed. Errors: what failed and how it was handled. "
    "Open tasks: what is still to do.\n"
    "Under each heading write short '- ' lines; write '- none' under a heading with "
    "nothing to say. Keep names, numbers, dates, identifiers, file paths and URLs "
    "verbatim, and every command verbatim with its exit status (e.g. `pytest -q` "
    "exited 1). Do not invent anything. Answer with the sections only."
)


class SummarizerError(RuntimeError):
    """The summarizer could not produce a summary (unreachable, bad answer, ...).

    Its message reaches API clients, so it never holds the summarizer's URL
    (which may carry credentials) nor what the upstream server answered:
    those are logged here, on the server.
    """


def system_prompt(instructions: str | None) -> str:
    """The structured prompt, with a session's ``instructions`` added after it."""
    if not instructions:
        return SYSTEM_PROMPT
    return f"{SYSTEM_PROMPT}\n\nInstructions for this session: {instructions}"


def transcript(items: Items) -> str:
    """The items as a plain-text transcript for an LLM."""
    lines = []
    for item in items:
        role = str(item.get("role") or "item")
        label = f"{role} {item['name']}" if role == "tool" and item.get("name") else role
        lines.append(f"[{label}]\n{item.get('rendered') or ''}")
    return "\n\n".join(lines)


def redacted(url: str) -> str:
    """``url`` without user, password, query or fragment (where credentials hide)."""
    parts = httpx.URL(url)
    return str(parts.copy_with(username=None, password=None, query=None, fragment=None))


def _post(url: str, body: dict[str, Any], headers: dict[str, str], timeout: float) -> Any:
    """The JSON answer of a 200, or ``SummarizerError`` saying nothing secret."""
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        log.warning("summarizer request to %s failed: %s", redacted(url), exc)
        raise SummarizerError(
            f"summarizer request to {redacted(url)} failed ({type(exc).__name__})"
        ) from None
    if response.status_code != 200:
        log.warning("summarizer at %s answered %s: %s", redacted(url),
                    response.status_code, response.text[:500])  # fmt: skip
        raise SummarizerError(f"summarizer answered HTTP {response.status_code}")
    try:
        return response.json()
    except ValueError as exc:
        raise SummarizerError("summarizer answer is not JSON") from exc


def _nonempty(content: Any) -> str:
    if not isinstance(content, str) or not content.strip():
        raise SummarizerError("summarizer returned an empty summary")
    return content.strip()


ANSWER_CAP = 4_096  # output tokens every current chat model accepts as max_tokens


class _LLMSummarizer:
    """What both protocols share: where, which model, the key, the limits, the prompt."""

    kind = "llm"
    path = ""  # the endpoint under ``base_url``

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30,
        max_tokens: int = 400,
        instructions: str | None = None,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.instructions = instructions
        self.name = f"{self.kind}:{model}"

    def for_session(self, instructions: str | None, model: str | None) -> Self:
        """This summarizer with a session's own instructions and model (``None``: keep)."""
        return type(self)(
            self.base_url, model or self.model, self.api_key, self.timeout, self.max_tokens,
            instructions if instructions is not None else self.instructions,
        )  # fmt: skip

    def summarize_within(self, items: Items, max_tokens: int) -> str:
        """The fold's budget as the answer's cap: a fold of many turns may be given thousands
        of tokens, and six headed sections do not fit the default 400.  Never above
        ``ANSWER_CAP`` (or this summarizer's own, if larger): a 200k window's fold may be
        given 60k, more than most models will write in one answer (they refuse the request)."""
        cap = min(max_tokens, max(self.max_tokens, ANSWER_CAP))
        capped = type(self)(
            self.base_url, self.model, self.api_key, self.timeout, cap, self.instructions
        )
        return capped.summarize(items)

    def summarize(self, items: Items) -> str:
        raise NotImplementedError  # each protocol's class posts its own request

    @property
    def url(self) -> str:
        return f"{self.base_url}{self.path}"

    @property
    def system(self) -> str:
        return system_prompt(self.instructions)


class OpenAICompatibleSummarizer(_LLMSummarizer):
    """Summaries from any OpenAI-compatible ``/chat/completions`` endpoint."""

    kind = "openai"
    path = "/chat/completions"

    def request_body(self, items: Items) -> dict[str, Any]:
        return {
            "model": self.model,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "messages": [
                {"role": "system", "content": self.system},
                {"role": "user", "content": transcript(items)},
            ],
        }

    def summarize(self, items: Items) -> str:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        answer = _post(self.url, self.request_body(items), headers, self.timeout)
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise SummarizerError("summarizer answer has no choices[0].message.content") from exc
        return _nonempty(content)


ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicSummarizer(_LLMSummarizer):
    """Summaries from Anthropic's Messages API (``POST {base}/v1/messages``)."""

    kind = "anthropic"
    path = "/v1/messages"

    def request_body(self, items: Items) -> dict[str, Any]:
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "system": self.system,
            "messages": [{"role": "user", "content": transcript(items)}],
        }

    def summarize(self, items: Items) -> str:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        answer = _post(self.url, self.request_body(items), headers, self.timeout)
        try:
            blocks = answer["content"]
            texts = [b["text"] for b in blocks if b.get("type", "text") == "text"]
        except (KeyError, TypeError, AttributeError) as exc:
            raise SummarizerError("summarizer answer has no content[].text") from exc
        if not all(isinstance(t, str) for t in texts):
            raise SummarizerError("summarizer answer has no content[].text")
        return _nonempty("".join(texts))
