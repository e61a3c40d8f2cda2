"""Summarizers: the extractive default, and the OpenAI adapter against a real
loopback HTTP server (``tests.domain.llm_provider``, not a mock); the Anthropic
one and the structured prompt are in ``test_llm_summarizer.py``."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from domain.summarizer import (
    ExtractiveSummarizer,
    OpenAICompatibleSummarizer,
    Summarizer,
    SummarizerError,
    for_session,
    summarizer_from_env,
)
from tests.domain.llm_provider import FakeProvider

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "name": None, "rendered": "Fix the failing test. It is in test_api.py."},
    {"role": "assistant", "name": None, "rendered": "\n  I will read the file first!  Then fix."},
    {"role": "tool", "name": "read_file", "rendered": "def test_api():\n    assert 1 == 2"},
    {"role": "tool", "name": "run_tests", "rendered": ""},
    {"role": "assistant", "name": None, "rendered": "The assertion was wrong"},
]


# ------------------------------------------------------------------ extractive


def test_extractive_is_a_summarizer_and_deterministic() -> None:
    s = ExtractiveSummarizer()
    assert isinstance(s, Summarizer)
    assert s.name == "extractive"
    assert s.summarize(ITEMS) == s.summarize([dict(i) for i in ITEMS])


def test_extractive_takes_the_gist_of_each_item() -> None:
    text = ExtractiveSummarizer().summarize(ITEMS)
    lines = text.splitlines()
    assert lines[0] == "Summary of 5 items: 1 user, 2 assistant, 2 tool."
    assert lines[1:] == [
        "- user: Fix the failing test.",
        "- assistant: I will read the file first!",
        "- tool: read_file: def test_api():",
        "- tool: run_tests",
        "- assistant: The assertion was wrong",
    ]


def test_extractive_handles_missing_fields_and_other_roles() -> None:
    text = ExtractiveSummarizer().summarize(
        [{"role": "system", "rendered": "You are helpful.\nBe brief."}, {"rendered": None}]
    )
    assert text.splitlines() == [
        "Summary of 2 items: 1 item, 1 system.",
        "- system: You are helpful.",
    ]
    assert ExtractiveSummarizer().summarize([]) == "Summary of 0 items."


def test_extractive_caps_length_and_says_what_it_left_out() -> None:
    items = [{"role": "user", "rendered": f"message {i} " + "x" * 300} for i in range(50)]
    text = ExtractiveSummarizer().summarize(items)
    assert len(text) <= 1200
    assert text.startswith("Summary of 50 items: 50 user.")
    marker = text.splitlines()[1]
    assert marker.startswith("[... ") and marker.endswith(" earlier]")
    shown = sum(1 for line in text.splitlines() if line.startswith("- user:"))
    assert shown + int(marker.split()[1]) == 50
    assert text.splitlines()[-1].startswith("- user: message 49"), "the latest are kept"
    # one huge item is clipped rather than crowding out the rest
    assert all(len(line) <= 170 for line in text.splitlines())


def test_extractive_folds_a_summary_again_with_its_lines() -> None:
    """Nested folds keep what earlier summaries said, the latest first to stay."""
    first = ExtractiveSummarizer().summarize(
        [{"role": "user", "rendered": "Use SQLite."}, {"role": "assistant", "rendered": "Done."}]
    )
    again = ExtractiveSummarizer().summarize([
        {"role": "summary", "rendered": f"[Summary] {first}"},
        {"role": "user", "rendered": "Now add a test."},
    ])  # fmt: skip
    assert "- user: Use SQLite." in again and "- user: Now add a test." in again
    assert again.startswith("Summary of 2 items: 1 user, 1 summary.")


def test_extractive_custom_cap() -> None:
    items = [{"role": "assistant", "rendered": f"Answer number {i}."} for i in range(20)]
    text = ExtractiveSummarizer(max_chars=120).summarize(items)
    assert len(text) <= 120
    with pytest.raises(ValueError):
        ExtractiveSummarizer(max_chars=10)


# ------------------------------------------------------------ loopback server


def test_openai_posts_chat_completions(provider: FakeProvider) -> None:
    s = OpenAICompatibleSummarizer(provider.base_url + "/", "tiny-model", api_key="sk-test")
    assert isinstance(s, Summarizer)
    assert s.name == "openai:tiny-model"
    text = s.summarize(ITEMS)
    assert text.startswith("SUMMARY(") and text == text.strip()
    [req] = provider.requests
    assert req["auth"] == "Bearer sk-test"
    body = req["body"]
    assert body["model"] == "tiny-model"
    assert body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    transcript = body["messages"][1]["content"]
    assert "[tool read_file]\ndef test_api():" in transcript
    assert transcript.index("Fix the failing test") < transcript.index("The assertion was wrong")
    assert text == f"SUMMARY({len(transcript)})"


def test_openai_without_api_key_sends_no_auth(provider: FakeProvider) -> None:
    OpenAICompatibleSummarizer(provider.base_url, "m").summarize(ITEMS[:1])
    assert provider.requests[0]["auth"] is None


def test_openai_upstream_error_is_a_summarizer_error(provider: FakeProvider) -> None:
    provider.mode = "error"
    with pytest.raises(SummarizerError, match="500"):
        OpenAICompatibleSummarizer(provider.base_url, "m").summarize(ITEMS)


def test_openai_answer_without_content_is_a_summarizer_error(provider: FakeProvider) -> None:
    provider.mode = "garbage"
    with pytest.raises(SummarizerError, match="choices"):
        OpenAICompatibleSummarizer(provider.base_url, "m").summarize(ITEMS)


def test_openai_timeout_is_a_summarizer_error(provider: FakeProvider) -> None:
    provider.mode = "slow"
    with pytest.raises(SummarizerError, match="failed"):
        OpenAICompatibleSummarizer(provider.base_url, "m", timeout=0.2).summarize(ITEMS)


def test_openai_unreachable_is_a_summarizer_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    s = OpenAICompatibleSummarizer(f"http://127.0.0.1:{port}", "m", timeout=2)
    with pytest.raises(SummarizerError):
        s.summarize(ITEMS)


def test_openai_requires_url_and_model() -> None:
    with pytest.raises(ValueError):
        OpenAICompatibleSummarizer("", "m")
    with pytest.raises(ValueError):
        OpenAICompatibleSummarizer("http://127.0.0.1:1", "")


# ------------------------------------------------------------------ from env


def test_from_env_defaults_to_extractive() -> None:
    assert isinstance(summarizer_from_env({}), ExtractiveSummarizer)
    assert isinstance(summarizer_from_env({"CTXSTORE_SUMMARIZER": "Extractive"}),
                      ExtractiveSummarizer)  # fmt: skip


def test_from_env_openai(provider: FakeProvider) -> None:
    s = summarizer_from_env(
        {
            "CTXSTORE_SUMMARIZER": "openai",
            "CTXSTORE_SUMMARIZER_URL": provider.base_url,
            "CTXSTORE_SUMMARIZER_MODEL": "env-model",
            "CTXSTORE_SUMMARIZER_API_KEY": "sk-env",
        }
    )
    assert isinstance(s, OpenAICompatibleSummarizer)
    assert s.name == "openai:env-model"
    assert s.summarize(ITEMS).startswith("SUMMARY(")
    assert provider.requests[0]["auth"] == "Bearer sk-env"
    assert json.dumps(provider.requests[0]["body"])  # a plain JSON body


def test_from_env_rejects_bad_configuration() -> None:
    with pytest.raises(ValueError, match="URL"):
        summarizer_from_env({"CTXSTORE_SUMMARIZER": "openai", "CTXSTORE_SUMMARIZER_MODEL": "m"})
    with pytest.raises(ValueError, match="MODEL"):
        summarizer_from_env({"CTXSTORE_SUMMARIZER": "anthropic"})
    with pytest.raises(ValueError, match="extractive"):
        summarizer_from_env({"CTXSTORE_SUMMARIZER": "magic"})


def test_a_session_configures_instructions_and_model(provider: FakeProvider) -> None:
    base = OpenAICompatibleSummarizer(provider.base_url, "house-model", api_key="sk-test")
    assert for_session(base, None) is base
    assert for_session(base, {"instructions": None, "summarizer_model": None}) is base
    mine = for_session(base, {"instructions": "Keep every file path.",
                              "summarizer_model": "small-model"})  # fmt: skip
    assert mine.name == "openai:small-model" and base.name == "openai:house-model"
    mine.summarize(ITEMS[:1])
    [req] = provider.requests
    assert req["body"]["model"] == "small-model" and req["auth"] == "Bearer sk-test"
    assert req["body"]["messages"][0]["content"].endswith(
        "Instructions for this session: Keep every file path."
    )
    extractive = ExtractiveSummarizer()
    assert for_session(extractive, {"instructions": "x", "summarizer_model": "y"}) is extractive


def test_compaction_settings_are_events_the_next_summary_follows(
    provider: FakeProvider, store_url: str
) -> None:
    from datetime import UTC, datetime, timedelta

    from service.runtime import Runtime

    summarizer = OpenAICompatibleSummarizer(provider.base_url, "house-model")
    rt = Runtime(store_url, summarizer=summarizer, auto_compact=False)
    try:
        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", at=t0)
        rt.execute("configure_compaction", sid, "Answer in French.", "petit-modele", at=t0)
        for n in range(8):
            rt.execute("append_node", sid, role="user", input=f"q{n}", at=t0 + timedelta(n))
            rt.execute("append_node", sid, role="assistant", output=f"a{n}", at=t0)
        done = rt.compact(str(sid))
        assert done["summarizer"] == "openai:petit-modele"
        assert provider.requests[-1]["body"]["model"] == "petit-modele"
        assert "Answer in French." in provider.requests[-1]["body"]["messages"][0]["content"]
        [row] = [s for s in rt.sessions() if s["session_id"] == str(sid)]
        # as a row from before recall_tool read: the key only once a session sets it
        assert row["compaction"] == {"instructions": "Answer in French.",
                                     "summarizer_model": "petit-modele"}  # fmt: skip
        rt.execute("configure_compaction", sid, None, None, at=t0)
        [row] = [s for s in rt.sessions() if s["session_id"] == str(sid)]
        assert row["compaction"] is None
    finally:
        rt.close()
