"""The loopback LLM provider the summarizer tests talk to (``tests.domain.llm_provider``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.domain.llm_provider import FakeProvider


@pytest.fixture(scope="module")
def provider_server() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


@pytest.fixture
def provider(provider_server: FakeProvider) -> FakeProvider:
    """The module's server, its requests and mode reset for each test."""
    provider_server.reset()
    return provider_server
