"""Content blocks: recognised, read as text, counted by the providers' formulas."""

from __future__ import annotations

import base64
import struct
import zlib

from domain.content_blocks import (
    anthropic_image_tokens,
    blocks_of,
    extra_tokens,
    image_size,
    openai_image_tokens,
    text_view,
)
from domain.tokens import count_tokens


def png(width: int, height: int) -> str:
    """A real (tiny-bodied) PNG header of the given size, base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))  # fmt: skip

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")
    return base64.b64encode(raw).decode()


def gif(width: int, height: int) -> str:
    return base64.b64encode(b"GIF89a" + struct.pack("<HH", width, height) + b"\0" * 8).decode()


def jpeg(width: int, height: int) -> str:
    sof = b"\xff\xc0" + struct.pack(">HBHH", 11, 8, height, width) + b"\x03\x01\x11\x00"
    return base64.b64encode(b"\xff\xd8" + b"\xff\xe0\x00\x04AB" + sof).decode()


def image(data: str, media: str = "image/png") -> dict[str, object]:
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def test_only_lists_of_well_formed_known_blocks_are_blocks() -> None:
    assert blocks_of([{"type": "text", "text": "hi"}]) == [{"type": "text", "text": "hi"}]
    assert blocks_of([]) is None and blocks_of("text") is None
    assert blocks_of({"type": "text", "text": "a dict, not a list"}) is None
    assert blocks_of([{"type": "text", "value": "no text field"}]) is None, "plain JSON, as before"
    assert blocks_of([{"type": "text", "text": "a"}, {"type": "mystery"}]) is None
    assert blocks_of([{"type": "thinking", "thinking": "hmm"}]) is None, "a signature is required"


def test_openai_spellings_read_as_the_canonical_blocks() -> None:
    url = f"data:image/png;base64,{png(10, 10)}"
    assert blocks_of([{"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                      {"type": "input_text", "text": "what is it?"}]) == [
        {"type": "image", "detail": "low",
         "source": {"type": "base64", "media_type": "image/png", "data": png(10, 10)}},
        {"type": "text", "text": "what is it?"},
    ]  # fmt: skip
    assert blocks_of([{"type": "input_image", "image_url": "https://x.test/a.png"}]) == [
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
    ]


def test_the_text_view_keeps_text_and_names_the_rest() -> None:
    blocks = blocks_of([
        {"type": "thinking", "thinking": "private", "signature": "sig"},
        {"type": "text", "text": "Here it is."}, image(png(4, 4)),
        {"type": "document", "title": "spec.pdf",
         "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
    ])  # fmt: skip
    assert blocks is not None
    assert text_view(blocks) == "Here it is.\n[image]\n[document: spec.pdf]"


def test_image_sizes_come_from_the_headers() -> None:
    assert image_size(png(640, 480)) == (640, 480)
    assert image_size(gif(33, 17)) == (33, 17)
    assert image_size(jpeg(1920, 1080)) == (1920, 1080)
    assert image_size(base64.b64encode(b"not an image").decode()) is None


def test_images_are_counted_by_the_providers_formulas() -> None:
    assert anthropic_image_tokens(1000, 1000) == 1334  # (1000 x 1000) / 750
    assert anthropic_image_tokens(4000, 4000) <= 1_534, "fit to ~1.15 MP first"
    assert openai_image_tokens(1024, 1024) == 85 + 170 * 4  # 768 x 768: four tiles
    assert openai_image_tokens(4096, 8192, "low") == 85
    blocks = blocks_of([image(png(1000, 1000))])
    assert blocks is not None
    assert extra_tokens(blocks, count_tokens) == max(1334, 85 + 170 * 4)
    unknown = blocks_of([{"type": "image", "source": {"type": "url", "url": "https://x"}}])
    assert unknown is not None and extra_tokens(unknown, count_tokens) == 1_600


def test_thinking_and_documents_count_too() -> None:
    blocks = blocks_of(
        [
            {"type": "thinking", "thinking": "step by step " * 10, "signature": "s"},
            {"type": "document", "source": {"type": "text", "data": "plain doc"}},
        ]
    )
    assert blocks is not None
    assert extra_tokens(blocks, count_tokens) == (
        count_tokens("step by step " * 10) + count_tokens("plain doc")
    )
    pdf = base64.b64encode(b"%PDF-1.4 /Type /Pages /Type /Page /Type /Page").decode()
    two_pages = blocks_of(
        [
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
            }
        ]
    )
    assert two_pages is not None and extra_tokens(two_pages, count_tokens) == 5_000
