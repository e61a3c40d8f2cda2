"""A node's text as the model first sees it, defined once.

The write side counts tokens of exactly this text when it records a node,
and the projection renders it and stores items by reference to it.  Both
must agree byte for byte, so there is one definition, and one canonical
JSON spelling for structured content.
"""

from __future__ import annotations

import json
from typing import Any

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``, one encoder built once.

    Byte-identical rebuilds depend on it: equal values always give equal text.
    """
    return _CANONICAL.encode(value)


def text_of(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return canonical_json(value)


def node_texts(role: str, input: Any, output: Any) -> tuple[str, str | None]:
    """(text, call): a tool's result and arguments, or a message's text and None.

    A message's text is its primary field (an assistant's output, anyone
    else's input), falling back to the other one when that is empty.
    """
    if role == "tool":
        return text_of(output), text_of(input)
    primary, other = (output, input) if role == "assistant" else (input, output)
    return text_of(primary if primary is not None else other), None
