"""The answers' models live in the client package (``ctxstore_client.context_responses``):
the server answers with the very classes the client parses into."""

from ctxstore_client.context_responses import *  # noqa: F403
