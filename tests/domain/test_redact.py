"""The redaction patterns (``domain/rules/redact.py``): what they mask, and what they leave."""

from __future__ import annotations

from domain.context import Item
from domain.rules.redact import mask, mask_json, mask_reply, redact_item
from tests.api.test_redaction import PASTED, SECRETS
from tests.conftest import immediate_policy


def test_masking_is_idempotent_and_leaves_ordinary_text_alone() -> None:
    masked, kinds = mask(PASTED)
    assert len(kinds) == 7 and mask(masked) == (masked, [])
    plain = "task-list skipped; ask AKIA about sk- prefixes; Bearer of bad news; ghp_short"
    assert mask(plain) == (plain, [])


def test_blocks_are_masked_but_image_bytes_are_not() -> None:
    blocks = [{"type": "text", "text": f"key {SECRETS['openai_key']}"},
              {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                           "data": "sk-" + "A" * 30}}]  # fmt: skip
    masked, kinds = mask_json(blocks)
    assert kinds == ["openai_key"] and masked[0]["text"] == "key [REDACTED:openai_key]"
    assert masked[1] == blocks[1]


def test_the_rule_masks_a_new_item_and_says_what_it_masked() -> None:
    item = Item(item_id="n1", source_node_id="n1", role="user", state="full",
                rendered=PASTED, tokens=1, ord=1, touched_at=0.0)  # fmt: skip
    assert redact_item(item, immediate_policy()) is None and item.rendered == PASTED
    why = redact_item(item, immediate_policy(redact_secrets=True))
    assert why is not None and why.startswith("masked 7 secrets: ")
    assert item.rendered == mask(PASTED)[0] and item.tokens > 1


def test_a_reply_is_masked_but_its_ids_cursors_and_block_bytes_are_not() -> None:
    secret = "sk-proj-Zq9Xw8Vu7Ts6Rr5Qp4Oo3Nn2"
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": f"iVBOR{secret}"}}  # fmt: skip
    reply = {
        "id": secret, "node_id": secret, "sibling_ids": [secret], "head": secret,
        "title": f"key {secret}", "nodes": [{"input": [image, {"type": "text", "text": secret}]}],
        "events": [{"type": "NodeAppended", "data": {"input": secret, "node_id": secret}}],
    }  # fmt: skip
    masked = mask_reply(reply)
    assert masked["id"] == masked["node_id"] == masked["head"] == secret
    assert masked["sibling_ids"] == [secret]
    assert masked["title"] == "key [REDACTED:openai_key]"
    assert masked["nodes"][0]["input"][0] == image  # bytes, not text
    assert masked["nodes"][0]["input"][1]["text"] == "[REDACTED:openai_key]"
    assert masked["events"][0]["data"] == {"input": "[REDACTED:openai_key]", "node_id": secret}
    assert mask_reply(masked) == masked  # masking twice changes nothing
