"""The LLM summarizers' structured prompt and the Anthropic Messages endpoint,
against a real loopback HTTP server (``tests.domain.llm_provider``), and both
protocols through a ``Runtime`` on each store: what the provider is sent, and
its answer reaching the projections only through ``SummaryRecorded``."""

from __future__ import annotations

import socket
from typing import Any
from uuid import UUID

import pytest
from prometheus_client import REGISTRY

from domain.llm_summarizer import (
    ANSWER_CAP,
    ANTHROPIC_URL,
    SECTIONS,
    SYSTEM_PROMPT,
    AnthropicSummarizer,
    OpenAICompatibleSummarizer,
    transcript,
)
from domain.summarizer import (
    BudgetedSummarizer,
    Summarizer,
    SummarizerError,
    for_session,
    summarizer_from_env,
)
from projections.rebuild import rebuild_and_compare
from service.compaction import summarize
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.domain.llm_provider import FakeProvider
from tests.domain.test_summarizer import ITEMS
from tests.projections.test_summary_sources import _session

PROTOCOLS = ("openai", "anthropic")


def llm(kind: str, provider: FakeProvider, model: str = "m", **kw: Any) -> Any:
    if kind == "anthropic":
        return AnthropicSummarizer(provider.root, model, **kw)
    return OpenAICompatibleSummarizer(provider.base_url, model, **kw)


def sent(kind: str, request: dict[str, Any]) -> tuple[str, str]:
    """The system prompt and the transcript a request carried."""
    body = request["body"]
    if kind == "anthropic":
        return body["system"], body["messages"][0]["content"]
    return body["messages"][0]["content"], body["messages"][1]["content"]


def test_the_prompt_asks_for_the_sections_and_for_verbatim_specifics() -> None:
    for section in SECTIONS:
        assert f"\n## {section}\n" in SYSTEM_PROMPT + "\n"
    assert SECTIONS == ("Goal", "Decisions", "Facts", "Files and artifacts", "Errors",
                        "Open tasks")  # fmt: skip
    for kept in ("names", "numbers", "dates", "identifiers", "paths", "exit status",
                 "verbatim"):  # fmt: skip
        assert kept in SYSTEM_PROMPT


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_a_sessions_instructions_are_added_to_the_prompt(kind: str, provider: FakeProvider) -> None:
    base = llm(kind, provider, "house", api_key="k")
    mine = for_session(base, {"instructions": "Keep every port number.",
                              "summarizer_model": None})  # fmt: skip
    assert mine.name == f"{kind}:house"
    base.summarize(ITEMS)
    mine.summarize(ITEMS)
    plain, _ = sent(kind, provider.requests[0])
    system, _ = sent(kind, provider.requests[1])
    assert plain == SYSTEM_PROMPT
    assert system.startswith(SYSTEM_PROMPT), "added, not replacing"
    assert system.endswith("\n\nInstructions for this session: Keep every port number.")


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_a_fold_s_budget_is_the_answer_s_cap(kind: str, provider: FakeProvider) -> None:
    s = llm(kind, provider, "house", api_key="k", instructions="Keep ports.")
    assert isinstance(s, BudgetedSummarizer)
    provider.answer = "  ## Facts\n- port 8443\n"
    assert s.summarize_within(ITEMS, 2_500) == "## Facts\n- port 8443"
    [req] = provider.requests
    assert req["body"]["max_tokens"] == 2_500
    assert sent(kind, req)[0].endswith("Instructions for this session: Keep ports.")
    assert s.max_tokens == 400, "the summarizer itself keeps its own cap"
    s.summarize_within(ITEMS, 60_000)  # a 200k window's fold: more than a model will write
    assert provider.requests[-1]["body"]["max_tokens"] == ANSWER_CAP == 4_096


def test_anthropic_posts_messages(provider: FakeProvider) -> None:
    s = AnthropicSummarizer(provider.root + "/", "claude-tiny", api_key="sk-ant", max_tokens=300)
    assert isinstance(s, Summarizer)
    assert s.name == "anthropic:claude-tiny"
    provider.answer = "  ## Goal\n- fix test_api.py\n"
    assert s.summarize(ITEMS) == "## Goal\n- fix test_api.py"
    [req] = provider.requests
    headers = req["headers"]
    assert headers["x-api-key"] == "sk-ant" and req["auth"] is None
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["content-type"] == "application/json"
    body = req["body"]
    assert set(body) == {"model", "max_tokens", "temperature", "system", "messages"}
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("claude-tiny", 300, 0)
    assert body["system"] == SYSTEM_PROMPT
    assert body["messages"] == [{"role": "user", "content": transcript(ITEMS)}]
    assert "[tool read_file]\ndef test_api():" in body["messages"][0]["content"]


def test_anthropic_without_a_key_sends_none(provider: FakeProvider) -> None:
    AnthropicSummarizer(provider.root, "m").summarize(ITEMS[:1])
    assert "x-api-key" not in provider.requests[0]["headers"]


@pytest.mark.parametrize(("mode", "message"), [
    ("error", "HTTP 500"), ("garbage", "content"), ("empty", "empty"), ("slow", "failed"),
])  # fmt: skip
def test_anthropic_failures_are_summarizer_errors(mode: str, message: str,
                                                  provider: FakeProvider) -> None:  # fmt: skip
    provider.mode = mode
    with pytest.raises(SummarizerError, match=message) as raised:
        AnthropicSummarizer(provider.root, "m", api_key="sk-secret", timeout=0.2).summarize(ITEMS)
    assert "sk-secret" not in str(raised.value)


def test_anthropic_unreachable_is_a_summarizer_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(SummarizerError, match="failed"):
        AnthropicSummarizer(f"http://127.0.0.1:{port}", "m", timeout=2).summarize(ITEMS)


def failed_calls(kind: str) -> float:
    labels = {"kind": kind, "outcome": "failed"}
    return REGISTRY.get_sample_value("ctxstore_summarizer_calls_total", labels) or 0.0


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_a_failure_is_counted_by_kind(kind: str, provider: FakeProvider) -> None:
    from domain.context import Item

    item = Item("u1", "u1", "user", "full", "Fix the test.", 5, 0, 0.0)
    before = failed_calls(kind)
    provider.mode = "empty"
    with pytest.raises(SummarizerError):
        summarize(llm(kind, provider), [item])
    assert failed_calls(kind) == before + 1


def test_from_env_anthropic(provider: FakeProvider) -> None:
    s = summarizer_from_env({"CTXSTORE_SUMMARIZER": "anthropic",
                             "CTXSTORE_SUMMARIZER_MODEL": "claude-env"})  # fmt: skip
    assert isinstance(s, AnthropicSummarizer)
    assert s.url == f"{ANTHROPIC_URL}/v1/messages" and s.api_key is None
    s = summarizer_from_env({"CTXSTORE_SUMMARIZER": "Anthropic",
                             "CTXSTORE_SUMMARIZER_URL": provider.root,
                             "CTXSTORE_SUMMARIZER_MODEL": "claude-env",
                             "CTXSTORE_SUMMARIZER_API_KEY": "sk-env"})  # fmt: skip
    assert s.name == "anthropic:claude-env"
    assert s.summarize(ITEMS).startswith("SUMMARY(")
    assert provider.requests[0]["headers"]["x-api-key"] == "sk-env"


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_the_answer_becomes_the_summary_through_its_event(
    kind: str, provider: FakeProvider, store_url: str
) -> None:
    """Sources, not stubs, reach the provider with the structured prompt and the
    session's instructions; its answer is the summary, and a rebuild reads it
    from the event without asking the provider again."""
    answer = "## Goal\n- read conf/settings.toml\n## Facts\n- port = 8431"
    provider.answer = answer
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy(),
                 summarizer=llm(kind, provider, "house"))  # fmt: skip
    try:
        sid = _session(rt)
        rt.execute("configure_compaction", sid, "Keep every port number.", None)
        done = rt.compact(sid)
        assert done["summarizer"] == f"{kind}:house"
        [request] = provider.requests
        system, text = sent(kind, request)
        added = "\n\nInstructions for this session: Keep every port number."
        assert system == SYSTEM_PROMPT + added
        assert "port = 8431" in text and "[tool result:" not in text, "the source, not its stub"
        [summary] = [i for i in rt.head_commit(sid)["items"] if i["state"] == "summary"]
        assert answer in summary["rendered"]
        recorded = [e for e in rt.app.events_of(UUID(sid)) if type(e).__name__ == "SummaryRecorded"]
        assert [e.text for e in recorded] == [answer]
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]
    assert len(provider.requests) == 1, "a rebuild never calls the summarizer"
