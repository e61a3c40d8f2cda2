"""Who is asking: the key a request was authenticated with, else its peer address.

Per-client limits (concurrent requests, open streams) are counted against
this identity.  The authentication middleware puts the id of the API key it
accepted in ``scope["ctxstore_key_id"]``; without one (auth off, or a request
refused before auth) the client's host is the best identity there is, so
everyone behind one proxy or on loopback shares it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KEY_ID = "ctxstore_key_id"


def client_identity(scope: Mapping[str, Any]) -> str:
    key_id = scope.get(KEY_ID)
    if key_id:
        return str(key_id)
    client = scope.get("client")
    return str(client[0]) if client else "unknown"
