"""API fixtures: a real Runtime on each store, a test client over it, a real server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

import service.runtime as runtime_module
from api.app import create_app
from tests.conftest import IMMEDIATE_POLICY_JSON, immediate_policy

# A Host the app serves by default: TestClient's own "testserver" is not one of them.
LOCAL = "http://localhost"
# Commands must say their body is JSON (``json=`` does; raw ``content=`` needs this).
JSON = {"content-type": "application/json"}


@pytest.fixture
def runtime(store_url: str) -> Iterator[Any]:
    rt = runtime_module.Runtime(store_url, policy=immediate_policy())
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def client(runtime: Any) -> Iterator[TestClient]:
    with TestClient(create_app(runtime), base_url=LOCAL) as c:
        yield c


ROOT = Path(__file__).resolve().parents[2]


def wait_until_up(proc: subprocess.Popen[Any], base: str, path: str = "/health",
                  seconds: float = 60) -> None:  # fmt: skip
    """Until ``base + path`` answers 200; a server that exits or stays down fails loudly."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{base}{path}", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server at {base} did not come up")
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(store_url: str, **env: str) -> Iterator[str]:
    """A real uvicorn process on a loopback port over the store, with ``env`` on top;
    its base URL."""
    port = _free_port()
    # Aging as soon as due, so a short session shows it (batching waits for a fuller window).
    env = {
        **os.environ,
        "CTXSTORE_DATABASE_URL": store_url,
        "PYTHONPATH": str(ROOT),
        "CTXSTORE_POLICY": IMMEDIATE_POLICY_JSON,
        **env,
    }  # ``env`` may set a policy
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, base)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def live_server(store_url: str) -> Iterator[str]:
    """A real uvicorn process on a loopback port over the store; its base URL."""
    with serving(store_url) as base:
        yield base
