"""HTTP API of ctxstore: thin Starlette handlers over ``service.runtime.Runtime``."""

from api.app import create_app

__all__ = ["create_app"]
