"""Browser fixtures: a real uvicorn server, Debian's Chromium driven by Playwright.

The server runs as its own process on a free loopback port over a SQLite
store in a temporary folder; the browser tests read what they expect from
the same server over HTTP.  Chromium is ``/usr/bin/chromium`` (``.ci/run``
installs it); without it these tests fail, loudly, unless
``CTXSTORE_SKIP_BROWSER=1`` opts out locally.  Every test leaves a
screenshot in ``tests/artifacts/ui/``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ui.scenario import TOUR_POLICY, Tour, build

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts" / "ui"
CHROMIUM = os.environ.get("CTXSTORE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    base: str
    http: httpx.Client
    tour: Tour

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = self.http.post(path, json=body)
        assert 200 <= response.status_code < 300, response.text
        return response.json()


@pytest.fixture(scope="session")
def chromium() -> str:
    if os.environ.get("CTXSTORE_SKIP_BROWSER") == "1":
        pytest.skip("CTXSTORE_SKIP_BROWSER=1: browser tests skipped")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: the browser tests need Debian's Chromium "
                    "(apt-get install -y chromium, as .ci/run does), or set "
                    "CTXSTORE_SKIP_BROWSER=1 to skip them locally", pytrace=False)  # fmt: skip
    return CHROMIUM


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("ui-server")
    port = _free_port()
    env = dict(os.environ, CTXSTORE_DATABASE_URL=f"sqlite:///{folder / 'ui.db'}",
               PYTHONPATH=str(ROOT), CTXSTORE_POLICY=TOUR_POLICY)  # fmt: skip
    with open(folder / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory",
             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if http.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not come up: "
                                   + (folder / "server.log").read_text())  # fmt: skip
            time.sleep(0.1)
        yield Server(f"http://127.0.0.1:{port}", http, build(http))
    finally:
        http.close()
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, server: Server, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page (own sessionStorage); page errors fail the test; a screenshot at the end."""
    context = browser.new_context(viewport={"width": 1500, "height": 1050})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
    context.set_default_timeout(10_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        yield tab
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    finally:
        context.close()
    assert errors == [], errors
