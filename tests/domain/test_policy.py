"""Policy: every rule constant validated when a policy is made, and the rules history."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import pytest

from domain.policy import _VALID, InvalidPolicy, Policy


def _json(value: Any) -> str:
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def test_every_field_has_a_validation() -> None:
    assert set(_VALID) == {f.name for f in fields(Policy)}


@pytest.mark.parametrize(("field", "value"), [
    ("tail_turns", -1), ("tail_turns", 2.5), ("tail_turns", True), ("args_cap", 0),
    ("result_cap", "4000"), ("protected_tools", ("grep", 3)), ("idle_minutes", 0),
    ("compact_at", 0), ("compact_at", 1.5), ("emergency_at", "high"),
    ("summary_target", 1), ("output_reserve_fraction", -0.1), ("output_reserve_max", -1),
    ("summary_max_tokens", 0), ("summary_max_tokens", "abc"), ("extra", []),
])  # fmt: skip
def test_a_bad_value_is_refused_by_name(field: str, value: Any) -> None:
    with pytest.raises(InvalidPolicy, match=f"policy {field} must be"):
        Policy(**{field: value})
    with pytest.raises(InvalidPolicy, match=field):
        Policy.from_json(f'{{"{field}": {_json(value)}}}')


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"tail_turns"', '{"tail_turn": 5}'])
def test_malformed_or_unknown_policies_are_refused(text: str) -> None:
    with pytest.raises(InvalidPolicy):
        Policy.from_json(text)


def test_good_overrides_are_taken() -> None:
    policy = Policy.from_json('{"tail_turns": 0, "compact_at": 1, "summary_max_tokens": null, '
                              '"protected_tools": ["grep"], "idle_minutes": 0.5}')  # fmt: skip
    assert (policy.tail_turns, policy.compact_at, policy.summary_max_tokens) == (0, 1, None)
    assert policy.protected_tools == ("grep",) and policy.idle_minutes == 0.5


def test_recorded_policies_keep_the_rules_they_ran_under() -> None:
    """A rules-history record made before ``summary_max_tokens`` existed replays uncapped."""
    legacy = ('{"args_cap": 200, "compact_at": 0.8, "emergency_at": 0.95, "extra": {}, '
              '"idle_minutes": 60.0, "output_reserve_fraction": 0.125, '
              '"output_reserve_max": 16384, "protected_tools": ["todo_create", '
              '"todo_update", "todo_list", "web_search"], "result_cap": 4000, '
              '"summary_target": 0.5, "tail_turns": 3}')  # fmt: skip
    old = Policy.from_record(legacy)
    assert old.summary_max_tokens is None
    assert old.rules_version == "r1-224d9f27cc", "the digest it was recorded under"
    assert Policy.from_record(Policy().to_json()) == Policy()
    assert Policy().rules_version != old.rules_version
    # An operator's partial override still gets today's defaults.
    assert Policy.from_json('{"tail_turns": 5}').summary_max_tokens == 24_000
