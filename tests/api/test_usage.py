"""POST /usage in each provider's own shape, and the occupancy it measures."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.test_commands import append, events, ok, refused, start
from tests.domain.test_usage import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES


@pytest.fixture
def sid(client: TestClient) -> str:
    s = start(client)
    append(client, s, "user", "hi")
    append(client, s, "assistant", "hello")
    return s


@pytest.mark.parametrize("usage,provider,total", [
    (OPENAI_CHAT, None, 1300), (OPENAI_RESPONSES, "openai", 1300),
    (ANTHROPIC, "anthropic", 1300),
])  # fmt: skip
def test_native_usage_gives_the_providers_own_total(
    client: TestClient, sid: str, usage: dict[str, Any], provider: str | None, total: int
) -> None:
    body = {"request_id": "r1", "usage": usage, **({"provider": provider} if provider else {})}
    r = ok(client.post(f"/sessions/{sid}/usage", json=body), 201)
    assert r["total_used"] == total
    occupancy = ok(client.get(f"/sessions/{sid}/occupancy"))
    assert occupancy["basis"] == "measured" and occupancy["total_used"] == total
    recorded = events(client, sid)[-1]["data"]
    assert recorded["native"] == usage and recorded["total_input"] == total


def test_the_flat_fields_keep_working(client: TestClient, sid: str) -> None:
    body = {"request_id": "r", "input_tokens": 4200, "cache_read": 800, "cache_creation": 100}
    assert ok(client.post(f"/sessions/{sid}/usage", json=body), 201)["total_used"] == 5100
    assert ok(client.get(f"/sessions/{sid}/occupancy"))["total_used"] == 5100
    recorded = events(client, sid)[-1]["data"]
    assert (recorded["convention"], recorded["native"]) == ("flat", None)


@pytest.mark.parametrize("body,status,code", [
    ({"request_id": "r"}, 422, "invalid_request"),
    ({"request_id": "r", "usage": OPENAI_CHAT, "input_tokens": 5}, 422, "invalid_request"),
    ({"request_id": "r", "usage": OPENAI_CHAT, "cache_read": 5}, 422, "invalid_command"),
    ({"request_id": "r", "usage": {"prompt_tokens": 5, "prompt_tokens_details":
                                   {"cached_tokens": 9}}}, 422, "invalid_command"),
    ({"request_id": "r", "usage": {"input_tokens": 5}, "provider": "acme"}, 422,
     "invalid_command"),
    ({"request_id": "r", "usage": [1]}, 422, "invalid_request"),
])  # fmt: skip
def test_usage_refusals_store_nothing(
    client: TestClient, sid: str, body: dict[str, Any], status: int, code: str
) -> None:
    refused(client, sid, f"/sessions/{sid}/usage", status, code, body)
