"""A command's body derived from its dataclass (``api.schemas.body_of``), as a new command's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api import schemas as s
from domain import commands as c


def test_fields_less_path_and_tenant_validated_like_hand_written_bodies() -> None:
    body = s.body_of(c.StartRun)
    assert set(body.model_fields) == {"expected_version", "at", "run_id"}
    parsed = body.model_validate_json(
        '{"run_id": "r1", "expected_version": 3, "at": "2024-01-01T02:00:00+02:00"}'
    )
    assert parsed.model_dump(exclude_none=True)["run_id"] == "r1"
    assert parsed.at is not None and parsed.at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    for bad in ('{"run_idx": "r1"}', '{"expected_version": "3"}', '{"at": "2024-01-01T00:00:00"}'):
        with pytest.raises(ValidationError):
            body.model_validate_json(bad)


def test_required_fields_stay_required_and_the_model_is_built_once() -> None:
    with pytest.raises(ValidationError):
        s.body_of(c.Checkout).model_validate_json("{}")
    assert s.body_of(c.Checkout) is s.body_of(c.Checkout)
    assert "source_session" not in s.body_of(c.Branch, ("source_session",)).model_fields


def test_a_command_gathering_stray_arguments_needs_its_own_body() -> None:
    with pytest.raises(TypeError):
        s.body_of(c.AppendNode)
