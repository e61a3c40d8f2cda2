"""The Responses, Gemini and Bedrock shapes: pure, and well-formed for any commit.

Random commits (any roles, states, half-surviving tool pairs, odd names and
ids, thinking and provider-native blocks) render in every shape the
provider's own library accepts, with no orphan tool pair, the same bytes
every time; each family's native blocks reach only that family's shapes.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.context import Item
from domain.native_blocks import family, left_out
from domain.render import SHAPES, render_shape
from tests.domain.test_render import MODEL, SPEC, commit, item, sample, spec_items
from tests.shape_checks import CHECKS, bedrock_ok, gemini_ok, responses_ok

NATIVE = [
    {"type": "thinking", "thinking": "Check the lexer.", "signature": "c2ln" * 20},
    {"type": "redacted_thinking", "data": "EmwKAhgB" * 10},
    {"type": "compaction", "content": "Earlier: read two files."},
    {"type": "reasoning", "id": "rs_01", "summary": [], "encrypted_content": "gAAA" * 30},
    {"type": "compaction", "id": "cmp_01", "encrypted_content": "gAAB" * 30},
]


def native_sample() -> list[Item]:
    items = sample()
    blocks = [*NATIVE, {"type": "text", "text": "Reading the file."}]
    items[5] = item(5, "assistant", "Reading the file.", blocks=blocks)
    return items


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_is_pure(shape: str) -> None:
    items = native_sample()
    shuffled = items[:]
    random.Random(3).shuffle(shuffled)
    roundtrip = [Item.from_json(json.loads(json.dumps(i.to_json()))) for i in items]
    first = json.dumps(render_shape(commit(items), shape, MODEL, cache=True))
    for again in (items, shuffled, roundtrip):
        assert json.dumps(render_shape(commit(again), shape, MODEL, cache=True)) == first


def test_native_blocks_reach_only_their_own_family() -> None:
    c = commit(native_sample())
    for shape in SHAPES:
        text = json.dumps(render_shape(c, shape, MODEL))
        carried = [b for b in NATIVE if json.dumps(b) in text]
        left = left_out(c, shape)
        if shape == "neutral":
            assert carried == NATIVE and left == []
        elif shape == "anthropic":
            assert carried == NATIVE[:3]
        elif shape == "responses":
            assert carried == NATIVE[3:]
        else:
            assert carried == []
        assert [(x["item_id"], x["block"]) for x in left] == [
            ("i5", n) for n, b in enumerate(NATIVE) if b not in carried]  # fmt: skip
        assert all(x["made_by"] == family(NATIVE[x["block"]]) for x in left)
    for shape, check in CHECKS.items():
        check(render_shape(c, shape, MODEL))


def test_the_validators_refuse_what_the_providers_refuse() -> None:
    """The checks are the libraries' own, not a rubber stamp."""
    c = commit(sample())
    bad = render_shape(c, "responses", MODEL)
    bad["input"][0]["type"] = "massage"
    with pytest.raises(AssertionError):
        responses_ok(bad)
    bad = render_shape(c, "gemini", MODEL)
    bad["contents"][0]["parts"][0]["txet"] = "x"
    with pytest.raises(Exception):  # noqa: B017 - pydantic's ValidationError
        gemini_ok(bad)
    bad = render_shape(c, "bedrock", MODEL)
    bad["messages"][0]["content"][0] = {"text": "x", "image": {}}
    with pytest.raises(AssertionError):
        bedrock_ok(bad)


BLOCKS = st.sampled_from([None, *[[b, {"type": "text", "text": "t"}] for b in NATIVE]])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(SPEC, BLOCKS), min_size=1, max_size=20))
def test_random_commits_render_well_formed_in_every_shape(
    specs: list[tuple[tuple[str, str, bool, bool, bool, str, str | None, str], Any]],
) -> None:
    c = commit(spec_items([spec for spec, _ in specs], [blocks for _, blocks in specs]))
    for shape, check in CHECKS.items():
        for cache in (False, True):
            request = render_shape(c, shape, MODEL, cache=cache)
            check(request)
            assert json.dumps(render_shape(c, shape, MODEL, cache=cache)) == json.dumps(request)
