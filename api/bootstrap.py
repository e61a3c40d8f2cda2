"""The served app, built once from ``Settings``: ``uvicorn api.bootstrap:bootstrap --factory``.

``bootstrap()`` loads the settings (once, from the environment) unless it is
given them, opens the runtime (``service.bootstrap``: tokenizer, stores,
summarizer) and hands it, with the API's limits and browser rules read from
the same snapshot, to ``api.app.create_app``. The runtime is closed when the
app shuts down.
"""

from __future__ import annotations

from starlette.applications import Starlette

from api.app import create_app
from api.browser_safety import BrowserSafety
from api.limits import Limits
from service.bootstrap import open_runtime
from service.settings import Settings


def bootstrap(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()
    limits = Limits.from_env(settings.env)  # checked before a database is opened
    browser = BrowserSafety.from_env(settings.env)
    runtime = open_runtime(settings)
    return create_app(runtime, limits=limits, browser=browser, close_runtime=True)
