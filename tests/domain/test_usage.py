"""Usage in each provider's own terms: recorded as given, totalled the provider's way."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from domain import errors, events
from domain.application import CtxStore
from domain.state_compressor import StateCompressor
from domain.usage import from_fields, from_native
from tests.domain.test_session import last, refused, seeded, stored

OPENAI_CHAT = {"prompt_tokens": 1300, "completion_tokens": 60, "total_tokens": 1360,
               "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
               "completion_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
OPENAI_RESPONSES = {"input_tokens": 1300, "input_tokens_details": {"cached_tokens": 1024},
                    "output_tokens": 60, "output_tokens_details": {"reasoning_tokens": 12},
                    "total_tokens": 1360}  # fmt: skip
ANTHROPIC = {"input_tokens": 50, "cache_read_input_tokens": 1000,
             "cache_creation_input_tokens": 250, "output_tokens": 60,
             "service_tier": "standard"}  # fmt: skip


def test_openai_prompt_tokens_already_include_the_cached_ones() -> None:
    for usage in (OPENAI_CHAT, OPENAI_RESPONSES):
        m = from_native(usage, "openai")
        assert m.convention == "openai" and m.total_input == 1300  # not 1300 + 1024
        parts = (m.input_tokens, m.cache_read, m.cache_creation, m.output_tokens)
        assert parts == (276, 1024, 0, 60)
    flat = from_native({"prompt_tokens": 10, "cached_tokens": 4, "completion_tokens": 1}, "x")
    assert (flat.total_input, flat.cache_read) == (10, 4)


def test_anthropic_input_excludes_cache_reads_and_writes() -> None:
    m = from_native(ANTHROPIC, "anthropic")
    assert m.convention == "anthropic" and m.total_input == 50 + 1000 + 250
    assert (m.cache_read, m.cache_creation, m.output_tokens) == (1000, 250, 60)
    # caching off: the cache fields come back null
    m = from_native({"input_tokens": 70, "cache_read_input_tokens": None,
                     "cache_creation_input_tokens": None, "output_tokens": 3}, "x")  # fmt: skip
    assert m.total_input == 70


def test_a_bare_input_tokens_pair_is_read_by_the_provider() -> None:
    bare = {"input_tokens": 100, "output_tokens": 5}
    assert from_native(bare, "anthropic").convention == "anthropic"
    assert from_native(bare, "openai").convention == "openai"
    with pytest.raises(errors.InvalidCommand, match="cannot tell"):
        from_native(bare, "somebody")


@pytest.mark.parametrize("usage", [
    {}, {"completion_tokens": 3}, {"prompt_tokens": -1}, {"prompt_tokens": "9"},
    {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 6}},
    {"prompt_tokens": 5, "prompt_tokens_details": 3}, {"prompt_tokens": 2**31},
    {"input_tokens": 2**31 - 1, "cache_read_input_tokens": 1},
    {"prompt_tokens": 1, "note": float("nan")},
])  # fmt: skip
def test_impossible_reports_are_refused(usage: dict[str, Any]) -> None:
    with pytest.raises(errors.InvalidCommand):
        from_native(usage, "openai")


def test_flat_fields_are_ctxstores_own() -> None:
    m = from_fields(100, cache_read=20, cache_creation=5, output_tokens=1)
    assert (m.convention, m.total_input) == ("flat", 125)


def test_usage_measured_records_the_native_object(app: CtxStore) -> None:
    sid = seeded(app)
    total, _ = app.measure_usage(sid, request_id="o", usage=OPENAI_CHAT)
    event = last(app, sid)
    assert isinstance(event, events.UsageMeasured) and total == 1300
    assert event.native == OPENAI_CHAT and event.convention == "openai"
    assert (event.input_tokens, event.cache_read, event.total_input) == (276, 1024, 1300)
    total, _ = app.measure_usage(sid, request_id="a", usage=ANTHROPIC, provider="anthropic")
    assert total == 1300 and last(app, sid).cache_creation == 250
    refused(
        app,
        sid,
        errors.InvalidCommand,
        lambda: app.measure_usage(sid, request_id="b", usage=ANTHROPIC, input_tokens=4),
    )
    refused(app, sid, errors.InvalidCommand, lambda: app.measure_usage(sid, request_id="c"))


def test_usage_measured_v1_upcasts_to_its_old_total(app: CtxStore) -> None:
    sid = seeded(app)
    app.measure_usage(sid, request_id="r", input_tokens=120, cache_read=100, output_tokens=9)
    v2 = stored(app, sid)[-1]
    state = app.mapper.transcoder.decode(StateCompressor().decompress(v2.state))  # as stored
    assert state.pop("class_version") == 2
    for key in ("cache_creation", "total_input", "convention", "native"):
        del state[key]
    v1 = replace(v2, state=app.mapper.transcoder.encode(state))
    event = app.mapper.to_domain_event(v1)
    assert isinstance(event, events.UsageMeasured)
    assert (event.total_input, event.cache_creation, event.convention, event.native) == (
        220, 0, "flat", None)  # fmt: skip
