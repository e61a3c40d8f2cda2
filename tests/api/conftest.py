"""API fixtures: a real Runtime on each store, and a test client over it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

import service.runtime as runtime_module
from api.app import create_app
from tests.conftest import immediate_policy


@pytest.fixture
def runtime(store_url: str) -> Iterator[Any]:
    rt = runtime_module.Runtime(store_url, policy=immediate_policy())
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def client(runtime: Any) -> Iterator[TestClient]:
    with TestClient(create_app(runtime)) as c:
        yield c
