"""A node's text as the model first sees it, defined once.

The write side counts tokens of exactly this text when it records a node,
and the projection renders it and stores items by reference to it.  Both
must agree byte for byte, so there is one definition, and one canonical
JSON spelling for structured content.
"""

from __future__ import annotations

import json
from typing import Any

from domain.content_blocks import Block, blocks_of, text_view

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``, one encoder built once.

    Byte-identical rebuilds depend on it: equal values always give equal text.
    """
    return _CANONICAL.encode(value)


def text_of(value: Any) -> str:
    """A field's text: itself, the text view of content blocks, or canonical JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    blocks = blocks_of(value)
    if blocks is not None:
        return text_view(blocks)
    return canonical_json(value)


def content_of(role: str, input: Any, output: Any) -> Any:
    """The field a node's item shows: a tool's result, a message's primary field.

    A message's primary field is an assistant's output and anyone else's
    input, falling back to the other one when that is empty.
    """
    if role == "tool":
        return output
    primary, other = (output, input) if role == "assistant" else (input, output)
    return primary if primary is not None else other


def node_texts(role: str, input: Any, output: Any) -> tuple[str, str | None]:
    """(text, call): a tool's result and arguments, or a message's text and None."""
    call = text_of(input) if role == "tool" else None
    return text_of(content_of(role, input, output)), call


def node_blocks(role: str, input: Any, output: Any) -> list[Block] | None:
    """The content blocks a node's item renders, when its content is a list of blocks."""
    return blocks_of(content_of(role, input, output))
