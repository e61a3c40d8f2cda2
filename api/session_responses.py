"""The answers' models live in the client package (``ctxstore_client.session_responses``):
the server answers with the very classes the client parses into."""

from ctxstore_client.session_responses import *  # noqa: F403
