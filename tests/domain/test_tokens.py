"""The tokenizer's cache folder, from a fresh clone's README command (issue 13, finding 8)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from domain import tokens


@pytest.fixture
def fresh_encoder() -> Iterator[None]:
    """Load the encoding anew in the test, and leave a freshly loaded one behind."""
    tokens._encoder.cache_clear()
    yield
    tokens._encoder.cache_clear()


def test_a_relative_cache_dir_means_the_folder_it_names_from_where_it_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_encoder: None
) -> None:
    """``TIKTOKEN_CACHE_DIR=../shared/tiktoken`` means that folder from the start-up's working
    folder, and keeps meaning it after a ``chdir``; the environment is not rewritten (issue 15)."""
    shared = Path(os.environ["TIKTOKEN_CACHE_DIR"]).resolve()
    monkeypatch.chdir(shared.parent)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", shared.name)
    before = dict(os.environ)
    assert tokens.cache_dir() == str(shared)
    tokens.check_tokenizer()
    monkeypatch.chdir(tmp_path)
    assert tokens.count_tokens.__wrapped__("hello world") == 2
    assert dict(os.environ) == before


def test_the_folder_configured_is_read_without_touching_the_environment(
    monkeypatch: pytest.MonkeyPatch, fresh_encoder: None
) -> None:
    shared = str(Path(os.environ["TIKTOKEN_CACHE_DIR"]).resolve())
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setattr(tokens, "_folder", shared)
    before = dict(os.environ)
    tokens.check_tokenizer()
    assert tokens.count_tokens.__wrapped__("hello world") == 2
    assert dict(os.environ) == before


def test_a_folder_without_the_encoding_fails_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_encoder: None
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    before = dict(os.environ)
    with pytest.raises(tokens.TokenizerUnavailable, match="Set TIKTOKEN_CACHE_DIR"):
        tokens.check_tokenizer()
    assert dict(os.environ) == before
