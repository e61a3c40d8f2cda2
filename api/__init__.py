"""HTTP API of ctxstore: thin Starlette handlers over ``service.runtime.Runtime``.

``create_app`` is imported on first use, so ``api.client`` (the Python
client, ``ctxstore_client``, re-exported) and ``api.responses`` load none of
the HTTP server.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from api.app import create_app

        return create_app
    raise AttributeError(f"module 'api' has no attribute {name!r}")
