"""The served app, built once from ``Settings``: ``uvicorn api.bootstrap:bootstrap --factory``.

``bootstrap()`` loads the settings (once, from the environment) unless it is
given them, opens the runtime (``service.bootstrap``: tokenizer, stores,
summarizer) and hands it, with the API's limits and browser rules read from
the same snapshot, to ``api.app.create_app``. The runtime is closed when the
app shuts down.  On PostgreSQL the app starts a helper server for large
bodies (``api.helper_server``); the helper is this same app, told by
``CTXSTORE_LANE_*`` to take the principal its parent resolved (proved by a
secret) and to stop when its parent is gone.
"""

from __future__ import annotations

from starlette.applications import Starlette

from api.app import create_app
from api.browser_safety import BrowserSafety
from api.helper_server import (
    HELPER_ENV,
    SECRET_ENV,
    SOCKET_ENV,
    HelperServer,
    become_helper,
    lane_threshold,
)
from api.large_body_lane import Lane
from api.limits import Limits
from api.routes_ops import Operations
from service.bootstrap import open_runtime
from service.settings import Settings


def bootstrap(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()
    limits = Limits.from_env(settings.env)  # checked before a database is opened
    browser = BrowserSafety.from_env(settings.env)
    ops = Operations.from_env(settings.env)
    lane_threshold(settings.env, settings.database_url)  # a bad value: before the database
    runtime = open_runtime(settings)
    threshold = lane_threshold(settings.env, settings.database_url, runtime.processor.partitions)
    lane = Lane(HelperServer(helper_env(settings)), threshold) if threshold else None
    alive = settings.env.get(HELPER_ENV, "")
    if alive.isdigit():  # this is a helper: its parent's pipe, socket and secret
        become_helper(int(alive), settings.env.get(SOCKET_ENV, ""))
    secret = settings.env.get(SECRET_ENV) if alive.isdigit() else None
    return create_app(runtime, limits=limits, browser=browser, close_runtime=True, lane=lane,
                      lane_secret=secret, ops=ops)  # fmt: skip


def helper_env(settings: Settings) -> dict[str, str]:
    """The helper's environment: this process's settings, as this process resolved them."""
    env = {**settings.env, "CTXSTORE_DATABASE_URL": settings.database_url}
    if settings.tiktoken_cache_dir:
        env["TIKTOKEN_CACHE_DIR"] = settings.tiktoken_cache_dir
    return env
