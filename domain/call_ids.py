"""The ids and names a request gives tool calls and tools, as providers accept them.

A rendered request names each tool call twice (the call and its result) and
each tool once; providers refuse what does not match ``[A-Za-z0-9_-]``
(Anthropic) or is longer than 40 (call ids, OpenAI) or 64 (names)
characters, and ids must not repeat within a request.  The model's own call
id is used as it is wherever that holds; otherwise a stable digest stands
in, so the same call keeps the same id in every render.
"""

from __future__ import annotations

import hashlib
import re

from domain.context import Item
from domain.tokens import count_tokens

_PROVIDER_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")
_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# What a tool call costs beyond its arguments and result: the tool_use and
# tool_result blocks' own structure, and the call id, which both name.
TOOL_FRAMING = 12


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def tool_call_id(raw: str) -> str:
    """``raw`` (the model's call id, else the item's id) as providers accept it."""
    if _PROVIDER_ID.fullmatch(raw):
        return raw
    return "call_" + digest(raw)[:32]


def item_call_id(item: Item) -> str:
    """The id a tool item's call goes by: the model's own when it gave one."""
    return tool_call_id(item.call_id or item.item_id)


def distinct_call_id(item: Item, used: set[str]) -> str:
    """``item_call_id``, told apart from an earlier call of the same request with that id.

    A deterministic agent (or a second run of one) may number its calls
    ``call_0``, ``call_1`` in every turn; providers want each id once.
    """
    call_id = item_call_id(item)
    if call_id in used:
        call_id = f"{call_id[:31]}_{digest(item.item_id)[:8]}"
    used.add(call_id)
    return call_id


def call_framing(item: Item) -> int:
    """Tokens a tool item's call and result blocks add around its text, as rendered.

    A commit's items are counted one by one; without this a session of many
    short tool calls with long ids (a UUID costs ~20 tokens, and is sent
    twice) rendered twice what its budget counted.
    """
    if item.role != "tool" or not item.has_result or item.call is None:
        return 0
    return 2 * count_tokens(item_call_id(item)) + TOOL_FRAMING


def tool_name(name: str | None) -> str:
    """A tool name providers accept (``[A-Za-z0-9_-]{1,64}``), readable and distinct.

    A name that needed changing keeps its legal characters and gets a short
    digest of the original, so two names that clean up alike stay apart.
    """
    if not name:
        return "tool"
    if _PROVIDER_NAME.fullmatch(name):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:56]
    return f"{cleaned or 'tool'}_{digest(name)[:7]}"


def valid_tool_name(name: str) -> bool:
    return bool(_PROVIDER_NAME.fullmatch(name))
