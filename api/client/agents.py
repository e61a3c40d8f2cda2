"""The Agents SDK adapter, kept importable as ``api.client.agents``: ``ctxstore_client.agents``."""

from ctxstore_client.agents import CtxStoreSession

__all__ = ["CtxStoreSession"]
