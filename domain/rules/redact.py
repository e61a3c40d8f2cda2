"""Redaction: secrets pasted into a conversation are masked in what leaves the store.

Off by default (``{"redact_secrets": true}`` in ``CTXSTORE_POLICY`` turns
it on, as a new ``rules_version`` from the next event).  A node's content in
the event log stays exactly as written (no rule changes a node's content);
what is masked is the item the node becomes, as it enters a commit, so the
render, a summarizer's input and attached or merged copies all carry the
mask, and the audit trail records rule ``redact`` with what kinds it masked
(never the secret).  The same patterns mask an export, and every read's
answer on the way out (``mask_reply``: the replay feed, nodes, commits,
titles), which also covers items committed before the policy was on.
Everything here is a
pure function of the text: a rebuild masks exactly as the live run did.
"""

from __future__ import annotations

import re
from typing import Any

from domain.context import Item
from domain.item_cost import tokens_of
from domain.policy import Policy

# (kind, pattern); the first group, if any, is kept (a "Bearer " prefix).
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private_key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?"
                               r"-----END [A-Z0-9 ]*PRIVATE KEY-----", re.DOTALL)),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}")),
    ("openai_key", re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("github_token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("bearer_token", re.compile(r"(\bBearer\s+)[A-Za-z0-9\-._~+/]{16,}=*", re.IGNORECASE)),
)  # fmt: skip
# Block fields that are not text a person pasted: image and document bytes, signatures.
_OPAQUE = frozenset({"data", "signature"})


def mask(text: str) -> tuple[str, list[str]]:
    """``text`` with every secret replaced by ``[REDACTED:kind]``, and the kinds found."""
    found: list[str] = []
    for kind, pattern in PATTERNS:

        def replace(match: re.Match[str], kind: str = kind) -> str:
            found.append(kind)
            return f"{match.group(1) if match.re.groups else ''}[REDACTED:{kind}]"

        text = pattern.sub(replace, text)
    return text, found


def blank(text: str) -> str:
    """``text`` with every secret replaced by a space: the words a reader of the masked text
    can see, and no word of the placeholder (a search must not match ``aws`` through it)."""
    for _, pattern in PATTERNS:
        text = pattern.sub(lambda m: f"{m.group(1) if m.re.groups else ''} ", text)
    return text


def mask_json(value: Any, found: list[str] | None = None) -> tuple[Any, list[str]]:
    """Every string inside ``value`` masked (opaque block fields left alone)."""
    found = [] if found is None else found
    if isinstance(value, str):
        text, kinds = mask(value)
        found += kinds
        return text, found
    if isinstance(value, list):
        return [mask_json(v, found)[0] for v in value], found
    if isinstance(value, dict):
        block = "type" in value  # a content block (or its source): its bytes are not text
        return {k: v if block and k in _OPAQUE else mask_json(v, found)[0]
                for k, v in value.items()}, found  # fmt: skip
    return value, found


# Reply fields that name things a client sends back (ids, cursors): never masked,
# so a read with redaction on still addresses the same nodes and commits.
_ID_FIELDS = frozenset({
    "id", "head", "parent", "sibling_of", "caller", "predecessor", "reads", "pinned", "covered",
    "commit", "base", "source_head", "source_session", "running", "merged_into", "dedup_of",
    "attached_from", "next", "after", "tenant",
})  # fmt: skip


def mask_reply(value: Any) -> Any:
    """A read's answer with every content string masked and every id left as it is.

    What ``/events``, ``/nodes``, ``/context`` and the other reads show when
    the policy redacts: the stored events stay as written, this is applied
    on the way out (``api/routes_queries.py``).
    """
    if isinstance(value, dict):
        block = "type" in value  # a content block's bytes are not text (as ``mask_json``);
        # an event's ``data`` (an object, next to its ``type``) is.  A key is text a
        # client wrote too (a metadata key may be a pasted token): masked as well.
        out: dict[Any, Any] = {}
        for k, v in value.items():
            kept = (k in _ID_FIELDS or k.endswith(("_id", "_ids"))
                    or (block and k in _OPAQUE and isinstance(v, str)))  # fmt: skip
            out[_unique(mask(k)[0], out) if isinstance(k, str) else k] = (
                v if kept else mask_reply(v)
            )
        return out
    if isinstance(value, list):
        return [mask_reply(v) for v in value]
    if isinstance(value, str):
        return mask(value)[0]
    return value


def _unique(key: str, taken: dict[Any, Any]) -> str:
    """``key``, numbered if another masked key already took it (two tokens, one mask)."""
    found, n = key, 1
    while found in taken:
        n += 1
        found = f"{key} ({n})"
    return found


def redact_item(item: Item, policy: Policy) -> str | None:
    """Mask a new item's secrets in place; the audit inputs if any were masked."""
    if not policy.redact_secrets:
        return None
    rendered, found = mask(item.rendered)
    call = item.call
    if call is not None:
        call, more = mask(call)
        found += more
    blocks = item.blocks
    if blocks is not None:
        blocks, more = mask_json(blocks)
        found += more
    if not found:
        return None
    item.call, item.blocks = call, blocks
    item.rendered = rendered
    item.tokens = tokens_of(item, policy)
    kinds = sorted(set(found))
    return f"masked {len(found)} secret{'s' if len(found) > 1 else ''}: {', '.join(kinds)}"
