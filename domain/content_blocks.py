"""Typed content blocks: images, documents, thinking, stored verbatim, read as one shape.

A node's content may be a list of typed blocks instead of text: what an
agent got from a provider (an Anthropic assistant turn with ``thinking`` and
``text`` blocks, an image a tool returned) or sends to one (a screenshot, a
PDF).  The event keeps the list exactly as given, so a thinking block's
signature comes back byte for byte.  This module is how the rest of the
system reads such a list:

* ``blocks_of`` recognises it (every element a well-formed block of a known
  type; anything else stays plain JSON, as before) and normalises the
  OpenAI spellings (``image_url``, ``input_text``, ``input_image``) to one
  canonical, Anthropic-like shape;
* ``text_view`` is the text the rules and summarizers read (images and
  documents as a short placeholder, thinking left out);
* ``extra_tokens`` estimates what the text view does not count: images by
  the providers' published formulas (the larger of Anthropic's and
  OpenAI's, so the window promise holds for either), documents by page, and
  thinking.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Callable
from typing import Any

Block = dict[str, Any]
MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
UNKNOWN_IMAGE_TOKENS = 1_600  # an image we cannot measure: the largest either provider bills
PDF_PAGE_TOKENS = 2_500  # a PDF page read as text and image (Anthropic: 1,500-3,000)
UNKNOWN_PDF_PAGES = 5


def _text(block: Block) -> bool:
    return isinstance(block.get("text"), str)


def _source(block: Block) -> bool:
    source = block.get("source")
    if not isinstance(source, dict):
        return False
    kind = source.get("type")
    if kind == "base64":
        return isinstance(source.get("data"), str) and isinstance(source.get("media_type"), str)
    if kind == "url":
        return isinstance(source.get("url"), str)
    if kind == "text":
        return isinstance(source.get("data"), str)
    return False


def _nested(block: Block) -> bool:
    content = block.get("content")
    return content is None or isinstance(content, str) or blocks_of(content) is not None


CHECKS: dict[str, Callable[[Block], bool]] = {
    "text": _text,
    "image": _source,
    "document": _source,
    "thinking": lambda b: (
        isinstance(b.get("thinking"), str) and isinstance(b.get("signature"), str)
    ),
    "redacted_thinking": lambda b: isinstance(b.get("data"), str),
    # provider-native items, carried opaque (``domain.native_blocks``)
    "compaction": lambda b: (
        ("content" in b and isinstance(b["content"], str | None))  # Anthropic's (None: failed)
        or isinstance(b.get("encrypted_content"), str)  # OpenAI's
    ),
    "reasoning": lambda b: (
        isinstance(b.get("summary"), list) or isinstance(b.get("encrypted_content"), str)
    ),
    "tool_use": lambda b: isinstance(b.get("id"), str) and isinstance(b.get("name"), str),
    "tool_result": lambda b: isinstance(b.get("tool_use_id"), str) and _nested(b),
    # OpenAI's spellings, read as the canonical ones
    "image_url": lambda b: (
        isinstance(b.get("image_url"), dict) and isinstance(b["image_url"].get("url"), str)
    ),
    "input_text": _text,
    "output_text": _text,
    "input_image": lambda b: isinstance(b.get("image_url"), str),
}


def _image_from_url(url: str, detail: Any = None) -> Block:
    """An image by URL, or by a ``data:`` URL (kept as base64, as Anthropic takes it)."""
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        block: Block = {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    else:
        block = {"type": "image", "source": {"type": "url", "url": url}}
    if detail in ("low", "high", "auto"):
        block["detail"] = detail  # OpenAI's, kept for the OpenAI shape and its token count
    return block


def _canonical(block: Block) -> Block:
    kind = block["type"]
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": block["text"]}
    if kind == "image_url":
        return _image_from_url(block["image_url"]["url"], block["image_url"].get("detail"))
    if kind == "input_image":
        return _image_from_url(block["image_url"], block.get("detail"))
    return block


def _unwrapped(value: list[Any]) -> list[Any]:
    """A Responses API output list: each ``message`` item stands for its content parts."""
    out: list[Any] = []
    for block in value:
        if isinstance(block, dict) and block.get("type") == "message":
            content = block.get("content")
            if isinstance(content, str):
                out.append({"type": "text", "text": content})
            elif isinstance(content, list) and content:
                out.extend(content)
            else:
                out.append(block)  # not a message we can read: refused below
        else:
            out.append(block)
    return out


def blocks_of(value: Any) -> list[Block] | None:
    """``value`` as canonical blocks, or None when it is not a list of blocks."""
    if not isinstance(value, list) or not value:
        return None
    value = _unwrapped(value)
    for block in value:
        if not isinstance(block, dict):
            return None
        check = CHECKS.get(str(block.get("type")))
        if check is None or not check(block):
            return None
    return [_canonical(block) for block in value]


def text_view(blocks: list[Block]) -> str:
    """What the rules, summaries and the per-item cap read of the blocks."""
    parts: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind == "text":
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
        elif kind == "document":
            title = block.get("title") or block["source"].get("media_type") or "document"
            parts.append(f"[document: {title}]")
        elif kind == "tool_use":
            parts.append(f"[tool call {block['name']}]")
        elif kind == "tool_result":
            content = block.get("content")
            nested = blocks_of(content)
            parts.append(text_view(nested) if nested else str(content or ""))
        # thinking and redacted_thinking: the model's own scratch work, not content
    return "\n".join(part for part in parts if part)


# ------------------------------------------------------------------- tokens


def extra_tokens(blocks: list[Block], count: Any) -> int:
    """Tokens the text view does not count: images, documents, thinking.

    ``count`` is the text tokenizer (``domain.tokens.count_tokens``).
    """
    total = 0
    for block in blocks:
        kind = block["type"]
        if kind == "image":
            total += image_tokens(block)
        elif kind == "document":
            total += document_tokens(block, count)
        elif kind == "thinking":
            total += count(block["thinking"])
        elif kind == "redacted_thinking":
            total += count(block["data"])
        elif kind in ("compaction", "reasoning"):
            total += native_tokens(block, count)
        elif kind == "tool_result":
            nested = blocks_of(block.get("content"))
            total += extra_tokens(nested, count) if nested else 0
    return total


def native_tokens(block: Block, count: Any) -> int:
    """A provider-native item, counted by every string it carries (opaque ones too)."""
    texts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for key, inner in value.items():
                if key not in ("type", "id", "status"):
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(block)
    return sum(int(count(text)) for text in texts)


def image_tokens(block: Block) -> int:
    source = block["source"]
    size = image_size(source["data"]) if source.get("type") == "base64" else None
    if size is None:
        return UNKNOWN_IMAGE_TOKENS
    return max(anthropic_image_tokens(*size), openai_image_tokens(*size, block.get("detail")))


def anthropic_image_tokens(width: int, height: int) -> int:
    """(w x h) / 750, after the long edge is fit to 1,568 px and the area to ~1.15 MP."""
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return math.ceil(width * scale * height * scale / 750)


def openai_image_tokens(width: int, height: int, detail: Any = None) -> int:
    """85 + 170 per 512 px tile, after fitting 2,048 px and a 768 px short side."""
    if detail == "low":
        return 85
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    shrink = min(1.0, 768 / min(w, h))
    w, h = w * shrink, h * shrink
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def document_tokens(block: Block, count: Any) -> int:
    source = block["source"]
    if source.get("type") == "text":
        return int(count(source["data"]))
    if source.get("type") == "base64":
        raw = _decode(source["data"])
        pages = max(raw.count(b"/Type /Page") - raw.count(b"/Type /Pages"),
                    raw.count(b"/Type/Page") - raw.count(b"/Type/Pages"))  # fmt: skip
        return max(1, pages) * PDF_PAGE_TOKENS
    return UNKNOWN_PDF_PAGES * PDF_PAGE_TOKENS


def _decode(data: str, limit: int | None = None) -> bytes:
    try:
        text = data if limit is None else data[: limit * 4 // 3 + 4]
        text = text[: len(text) - len(text) % 4]
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_size(data: str) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, JPEG or WebP header, or None."""
    head = _decode(data, 64 * 1024)
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return int(width), int(height)
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return int(width), int(height)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp_size(head)
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(head)
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8X" and len(head) >= 30:
        return (int.from_bytes(head[24:27], "little") + 1,
                int.from_bytes(head[27:30], "little") + 1)  # fmt: skip
    if chunk == b"VP8 " and len(head) >= 30:
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(head) >= 25:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(head: bytes) -> tuple[int, int] | None:
    index = 2
    while index + 9 < len(head):
        if head[index] != 0xFF:
            index += 1
            continue
        marker = head[index + 1]
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE,
                      0xCF):  # fmt: skip
            height, width = struct.unpack(">HH", head[index + 5 : index + 9])
            return width, height
        length = struct.unpack(">H", head[index + 2 : index + 4])[0]
        index += 2 + length
    return None
