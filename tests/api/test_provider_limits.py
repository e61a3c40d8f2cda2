"""What providers refuse is refused at the door; a guessed window is said, not silent.

Image and document blocks whose base64 does not decode, whose media type no
provider takes, or that are over the providers' size limits are a 422
``invalid_content_block`` (nothing stored, a batch included).  A session on
a model the catalogue does not know says which window it assumed; ``GET
/models`` lists the known windows, a deployment's own included.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import service.runtime as runtime_module
from api.app import create_app
from domain.block_checks import (
    MAX_DOCUMENT_BYTES,
    MAX_IMAGE_BYTES,
    InvalidContentBlock,
    check_blocks,
)
from domain.catalogue import DEFAULT_WINDOW
from service.deployment_models import models_from_env
from tests.api.conftest import LOCAL
from tests.conftest import immediate_policy
from tests.domain.test_content_blocks import png

PNG = png(10, 10)


def image(data: str, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def start(client: TestClient, **body: Any) -> str:
    answer = client.post("/sessions", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["session_id"])


REFUSED = [
    ([image("!!!notbase64")], "base64"),
    ([image("")], "base64"),
    ([image(PNG, "image/bmp")], "media_type"),
    ([image(PNG, "image/jpeg")], "media_type"),  # a PNG said to be a JPEG
    (
        [
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/msword",
                    "data": "JVBERi0=",
                },
            }
        ],
        "media_type",
    ),  # fmt: skip
    ([{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}], "base64"),
    ([{"type": "tool_result", "tool_use_id": "t1", "content": [image("%%")]}], "base64"),
]


@pytest.mark.parametrize(("blocks", "reason"), REFUSED)
def test_blocks_providers_refuse_are_refused(client: TestClient, blocks: list[Any],
                                             reason: str) -> None:  # fmt: skip
    sid = start(client)
    s = f"/sessions/{sid}"
    assert client.post(f"{s}/nodes", json={"role": "user", "input": "hi"}).status_code == 201
    before = client.get(s).json()["version"]
    answer = client.post(f"{s}/nodes", json={"role": "user", "input": blocks})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["details"]["reason"]) == ("invalid_content_block", reason)
    batch = [{"role": "assistant", "output": "ok"}, {"role": "user", "input": blocks}]
    answer = client.post(f"{s}/nodes/batch", json={"nodes": batch})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_content_block"
    assert client.get(s).json()["version"] == before  # nothing stored, the batch included


def test_good_blocks_are_stored(client: TestClient) -> None:
    sid = start(client)
    blocks = [{"type": "text", "text": "look"}, image(PNG),
              {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
              {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                              "data": "JVBERi0="}},
              {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
              ]  # fmt: skip
    answer = client.post(f"/sessions/{sid}/nodes", json={"role": "user", "input": blocks})
    assert answer.status_code == 201, answer.text


def test_an_unknown_model_says_which_window_it_assumed(client: TestClient) -> None:
    created = client.post("/sessions", json={"model": "acme:mystery"}).json()
    [warning] = created["warnings"]
    assert "acme:mystery" in warning and f"{DEFAULT_WINDOW:,}" in warning
    s = f"/sessions/{created['session_id']}"
    client.post(f"{s}/nodes", json={"role": "user", "input": "hi"})
    for path in (s, f"{s}/budget", f"{s}/render", f"{s}/occupancy"):
        assert client.get(path).json()["warnings"] == [warning], path
    # a window of its own: no guess, no warning
    changed = client.post(f"{s}/model", json={"model": "acme:mystery", "context_window": 9000})
    assert changed.json()["warnings"] == []
    assert client.get(f"{s}/budget").json()["warnings"] == []
    known = start(client, model="openai:gpt-4o")
    client.post(f"/sessions/{known}/nodes", json={"role": "user", "input": "hi"})
    assert client.get(f"/sessions/{known}/budget").json()["warnings"] == []


def test_models_lists_the_catalogue_and_the_deployments_own(store_url: str) -> None:
    rt = runtime_module.Runtime(store_url, policy=immediate_policy(),
                                models={"acme:big": 50_000, "openai:gpt-4o": 64_000})  # fmt: skip
    try:
        with TestClient(create_app(rt), base_url=LOCAL) as client:
            listed = client.get("/models").json()
            rows = {row["model"]: row for row in listed["models"]}
            assert listed["default_window"] == DEFAULT_WINDOW
            assert rows["acme:big"] == {"model": "acme:big", "window": 50_000,
                                        "source": "deployment"}  # fmt: skip
            assert rows["openai:gpt-4o"]["window"] == 64_000
            assert rows["anthropic:claude-sonnet-4"]["source"] == "catalogue"
            created = client.post("/sessions", json={"model": "acme:big"}).json()
            assert created["warnings"] == []
            s = f"/sessions/{created['session_id']}"
            client.post(f"{s}/nodes", json={"role": "user", "input": "hi"})
            budget = client.get(f"{s}/budget").json()
            # written into the event as the session's window: a rebuild needs no config
            assert (budget["window"], budget["warnings"]) == (50_000, [])
            assert client.get(s).json()["context_window"] == 50_000
    finally:
        rt.close()


def test_deployment_models_come_from_the_file_and_the_variable(tmp_path: Path) -> None:
    file = tmp_path / "models.json"
    file.write_text(json.dumps({"acme:a": 1000, "acme:b": 2000}))
    env = {"CTXSTORE_MODELS_FILE": str(file), "CTXSTORE_MODELS": '{"acme:b": 3000}'}
    assert models_from_env(env) == {"acme:a": 1000, "acme:b": 3000}
    for bad in ('["acme:a"]', '{"nocolon": 1000}', '{"acme:a": 10}', '{"acme:a": "big"}', "{"):
        with pytest.raises(ValueError, match="CTXSTORE_MODELS"):
            models_from_env({"CTXSTORE_MODELS": bad})
    with pytest.raises(ValueError, match="CTXSTORE_MODELS_FILE"):
        models_from_env({"CTXSTORE_MODELS_FILE": str(tmp_path / "missing.json")})


def test_over_the_providers_size_limits_is_refused() -> None:
    """Past the API's own body limit (4 MiB by default) only a deployment that raised it
    reaches this check: the domain refuses what the providers would."""
    big = base64.b64encode(b"\x89PNG" + bytes(MAX_IMAGE_BYTES)).decode()
    with pytest.raises(InvalidContentBlock) as refused:
        check_blocks("input", [image(big)])
    assert refused.value.details["reason"] == "too_large"
    data = "A" * (MAX_DOCUMENT_BYTES // 3 * 4 + 8)
    pdf = {"type": "document",
           "source": {"type": "base64", "media_type": "application/pdf", "data": data}}  # fmt: skip
    with pytest.raises(InvalidContentBlock, match="over the providers' limit"):
        check_blocks("output", [pdf])
    check_blocks("input", [image(PNG)])  # within every limit: no refusal
