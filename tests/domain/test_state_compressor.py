"""A large event state is stored compressed; a small one, and any stored before, as is."""

from __future__ import annotations

import json
import random

from hypothesis import given
from hypothesis import strategies as st

from domain.state_compressor import COMPRESS_AT, MAGIC, StateCompressor
from projections.pg_payloads import STUB

LARGE = json.dumps({"output": "def value(self): return self.items\n" * 200}).encode()


def test_a_large_state_is_compressed_and_reads_back() -> None:
    stored = StateCompressor().compress(LARGE)
    assert stored.startswith(MAGIC) and len(stored) < len(LARGE) // 4
    assert StateCompressor().decompress(stored) == LARGE


def test_a_small_state_is_stored_as_is() -> None:
    small = json.dumps({"input": "hello"}).encode()
    assert len(small) < COMPRESS_AT
    assert StateCompressor().compress(small) == small


def test_what_compression_would_not_shrink_is_stored_as_is() -> None:
    noise = random.Random(0).randbytes(4 * COMPRESS_AT)  # zlib's stream would be longer
    assert StateCompressor().compress(noise) == noise


def test_states_stored_before_read_as_they_were() -> None:
    for old in (LARGE, STUB + b"42", b'{"a": 1}', b""):
        assert StateCompressor().decompress(old) == old


@given(st.text(max_size=3 * COMPRESS_AT).map(lambda s: json.dumps(s).encode()))
def test_any_json_state_round_trips(state: bytes) -> None:
    assert StateCompressor().decompress(StateCompressor().compress(state)) == state
