"""HTTP API of ctxstore: thin Starlette handlers over ``projections.runtime.Runtime``."""

from api.app import create_app

__all__ = ["create_app"]
