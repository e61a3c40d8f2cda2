"""Refuse at the door the image and document blocks every provider would refuse.

A block is stored verbatim and rendered on every later call until a rule
folds it away, so one a provider cannot take (base64 that does not decode, a
media type no provider accepts, a file over their size limits) would break
every call after it.  The checks run when a node is written (``check_blocks``
from ``domain.node_commands.check_content``); the refusal is a 422 with code
``invalid_content_block`` and ``details.reason``: ``base64``, ``media_type``
or ``too_large``.  The limits are the tightest of the providers ctxstore
renders for (Anthropic: 5 MB an image; Anthropic and OpenAI: 32 MB a PDF).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from domain.content_blocks import MEDIA_TYPES, Block, blocks_of
from domain.errors import InvalidCommand

DOCUMENT_TYPES = ("application/pdf",)
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
MAGIC = {"image/png": b"\x89PNG", "image/jpeg": b"\xff\xd8", "image/gif": b"GIF8",
         "image/webp": b"RIFF"}  # fmt: skip


class InvalidContentBlock(InvalidCommand):
    code = "invalid_content_block"


def check_blocks(field: str, value: Any) -> None:
    """Raise ``InvalidContentBlock`` for the first image or document a provider refuses."""
    blocks = blocks_of(value)
    for index, block in enumerate(blocks or []):
        where = f"{field}[{index}]"
        if block["type"] in ("image", "document"):
            _check_source(where, block)
        elif block["type"] == "tool_result":
            check_blocks(f"{where}.content", block.get("content"))


def _refuse(where: str, reason: str, message: str, **details: Any) -> InvalidContentBlock:
    return InvalidContentBlock(f"{where}: {message}", field=where, reason=reason, **details)


def _check_source(where: str, block: Block) -> None:
    source = block["source"]
    if source.get("type") != "base64":
        return  # a URL or inline text: the provider fetches or reads it
    image = block["type"] == "image"
    accepted = MEDIA_TYPES if image else DOCUMENT_TYPES
    media_type = source["media_type"]
    if media_type not in accepted:
        raise _refuse(where, "media_type", f"media type {media_type!r} is not one the "
                      f"providers accept here ({', '.join(accepted)})",
                      media_type=media_type, accepted=list(accepted))  # fmt: skip
    limit = MAX_IMAGE_BYTES if image else MAX_DOCUMENT_BYTES
    data: str = source["data"]
    if len(data) > (limit + 2) // 3 * 4:  # too large before decoding anything
        raise _too_large(where, len(data) * 3 // 4, limit)
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _refuse(where, "base64", "source.data is not valid base64") from None
    if not raw:
        raise _refuse(where, "base64", "source.data decodes to nothing")
    if len(raw) > limit:
        raise _too_large(where, len(raw), limit)
    if image:
        found = next((kind for kind, magic in MAGIC.items() if raw.startswith(magic)), None)
        if found is not None and found != media_type:
            raise _refuse(where, "media_type", f"the data is {found}, not {media_type}",
                          media_type=media_type, detected=found)  # fmt: skip


def _too_large(where: str, size: int, limit: int) -> InvalidContentBlock:
    return _refuse(where, "too_large", f"{size:,} bytes, over the providers' limit of "
                   f"{limit:,}", size=size, limit=limit)  # fmt: skip
