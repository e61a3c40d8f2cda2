"""The block checks as properties: what decodes within the limits passes, nothing else."""

from __future__ import annotations

import base64
import binascii

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.block_checks import InvalidContentBlock, check_blocks


def image(data: str, media_type: str = "image/png") -> dict[str, object]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


@given(st.binary(min_size=1, max_size=2048))
def test_any_png_bytes_that_decode_pass(body: bytes) -> None:
    check_blocks("input", [image(base64.b64encode(b"\x89PNG" + body).decode())])


@given(st.text(max_size=64))
def test_text_that_is_not_strict_base64_is_refused(text: str) -> None:
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if decoded and not decoded.startswith((b"\xff\xd8", b"GIF8", b"RIFF")):
        check_blocks("input", [image(text)])  # it decodes: nothing to refuse
        return
    with pytest.raises(InvalidContentBlock) as refused:
        check_blocks("input", [image(text)])
    assert refused.value.details["reason"] in ("base64", "media_type")


@given(st.sampled_from(["image/bmp", "image/svg+xml", "text/plain", "application/pdf"]))
def test_media_types_no_provider_takes_as_an_image_are_refused(media_type: str) -> None:
    with pytest.raises(InvalidContentBlock) as refused:
        check_blocks("input", [image(base64.b64encode(b"\x89PNG").decode(), media_type)])
    assert refused.value.details["reason"] == "media_type"
