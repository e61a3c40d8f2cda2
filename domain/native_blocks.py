"""Provider-native items: kept opaque, sent back only to the provider that made them.

Some of what a provider answers is meant for that provider alone: Anthropic's
``thinking`` (signed), ``redacted_thinking`` and ``compaction`` blocks, OpenAI's
``reasoning`` items (``encrypted_content``) and encrypted ``compaction``
items.  The event stores them as given and the budget counts them
(``domain.content_blocks``).  A render for the family that made one carries it
byte for byte; a render for another leaves it out, since no other provider can
read it (and most refuse it), and says so in the answer's ``left_out`` list,
the audit of what a shape could not carry.
"""

from __future__ import annotations

from typing import Any

from domain.context import ContextCommit

Block = dict[str, Any]
ANTHROPIC = "anthropic"
OPENAI = "openai"
ANTHROPIC_COMPACTION_KEYS = ("content", "signature", "tool_changes", "cache_control")
NATIVE_TYPES = ("thinking", "redacted_thinking", "compaction", "reasoning")
# The family whose native items each shape carries (None: none of them).
SHAPE_FAMILY: dict[str, str | None] = {
    "anthropic": ANTHROPIC,
    "responses": OPENAI,
    "openai": None,  # Chat Completions has no place for reasoning items
    "gemini": None,
    "bedrock": None,
}


def family(block: Block) -> str | None:
    """Which provider made ``block``, or None for portable content."""
    kind = block.get("type")
    if kind in ("thinking", "redacted_thinking"):
        return ANTHROPIC
    if kind == "compaction":  # Anthropic's has content (maybe null); OpenAI's only the cipher
        anthropic = any(key in block for key in ANTHROPIC_COMPACTION_KEYS)
        return ANTHROPIC if anthropic else OPENAI
    if kind == "reasoning":
        return OPENAI
    return None


def carried(block: Block, shape: str) -> bool:
    """Whether a render in ``shape`` may carry ``block`` (the neutral shape carries all)."""
    made_by = family(block)
    return made_by is None or shape == "neutral" or made_by == SHAPE_FAMILY.get(shape)


def left_out(commit: ContextCommit, shape: str) -> list[dict[str, Any]]:
    """The native blocks of shown items a render in ``shape`` leaves out, in order."""
    from domain.provider_compaction import folded_ids

    out: list[dict[str, Any]] = []
    folded = folded_ids(commit, shape)  # not shown either
    for item in sorted(commit.items, key=lambda i: i.ord):
        if item.state == "summarized" or not item.blocks or item.item_id in folded:
            continue
        for index, block in enumerate(item.blocks):
            if not carried(block, shape):
                made_by = family(block)
                out.append({"item_id": item.item_id, "block": index, "type": block["type"],
                            "made_by": made_by, "rule": "provider_native",
                            "reason": f"{block['type']} made by {made_by}: "
                                      f"the {shape} shape cannot carry it"})  # fmt: skip
    return out
