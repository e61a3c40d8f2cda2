"""How much of a render repeats the previous render of the same session: the cacheable prefix.

A provider's prompt cache pays off for the leading part of a request that is
byte-identical to the one sent before.  For the render span (traces only) a
process remembers, per session and shape, a digest of each message of its
last render and counts how many leading messages the next one shares.  The
request's other fields (system, tools, model) count as one leading entry:
when they changed, nothing is shared.  Per process and bounded, so a render
served by another worker, or after the memo let the session go, counts 0.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

MESSAGE_KEYS = ("messages", "contents", "input")  # where each shape keeps its turns
REMEMBERED = 1024  # sessions (and shapes) whose last render is remembered


def entries(request: dict[str, Any]) -> tuple[bytes, list[bytes]]:
    """A digest of the request's fields other than its turns, and one of each turn."""
    key = next((k for k in MESSAGE_KEYS if isinstance(request.get(k), list)), None)
    turns: list[Any] = request[key] if key is not None else []
    head = {k: v for k, v in request.items() if k != key}
    return _digest(head), [_digest(turn) for turn in turns]


def _digest(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).digest()


class PrefixMemo:
    def __init__(self, size: int = REMEMBERED) -> None:
        self.size = size
        self._lock = threading.Lock()  # renders of several threads
        self._last: OrderedDict[tuple[str, str], tuple[bytes, list[bytes]]] = OrderedDict()

    def shared(self, session_id: str, shape: str, request: dict[str, Any]) -> tuple[int, int]:
        """(messages in ``request``, leading messages identical to the last render's)."""
        head, turns = entries(request)
        key = (session_id, shape)
        with self._lock:
            before = self._last.pop(key, None)
            self._last[key] = (head, turns)
            while len(self._last) > self.size:
                self._last.popitem(last=False)
        if before is None or before[0] != head:
            return len(turns), 0
        prefix = 0
        for old, new in zip(before[1], turns, strict=False):
            if old != new:
                break
            prefix += 1
        return len(turns), prefix
