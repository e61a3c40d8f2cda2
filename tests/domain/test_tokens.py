"""The tokenizer's cache folder, from a fresh clone's README command (issue 13, finding 8)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from domain import tokens


def test_a_relative_cache_dir_is_made_absolute_at_start_up(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:  # fmt: skip
    """``TIKTOKEN_CACHE_DIR=../shared/tiktoken`` must still mean that folder in a child
    process started elsewhere (``scripts/rebuild`` run from a temporary folder)."""
    shared = Path(os.environ["TIKTOKEN_CACHE_DIR"]).resolve()
    monkeypatch.chdir(shared.parent)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", shared.name)
    tokens.check_tokenizer()
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(shared)
