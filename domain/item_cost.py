"""What an item costs in tokens, as a context shows it."""

from __future__ import annotations

from typing import Any

from domain.call_ids import call_framing
from domain.context import Item
from domain.policy import Policy
from domain.tokens import blocks_tokens, item_tokens

_SAME: Any = object()


def tokens_of(item: Item, policy: Policy, rendered: str | None = None,
              call: str | None = _SAME, blocks: Any = _SAME) -> int:  # fmt: skip
    """What ``item`` costs showing ``rendered``, ``call`` and ``blocks`` (default: its own).

    Content blocks add what their text does not say (images, documents);
    generation 2 counts a tool call's blocks and ids too (``render.call_framing``).
    """
    text = item.rendered if rendered is None else rendered
    args = item.call if call is _SAME else call
    tokens = item_tokens(text, args, item.name)
    tokens += blocks_tokens(item.blocks if blocks is _SAME else blocks)
    if policy.generation >= 2 and item.role == "tool" and args is not None:
        tokens += call_framing(item)
    return tokens
