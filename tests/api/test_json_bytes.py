"""The fast response encoder writes exactly the standard library's bytes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.json_bytes import json_bytes, stdlib_bytes

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_same_bytes_as_the_standard_library(value: Any) -> None:
    try:
        expected = stdlib_bytes(value)
    except (UnicodeEncodeError, ValueError) as refused:
        with pytest.raises(type(refused)):
            json_bytes(value)
        return
    assert json_bytes(value) == expected


@pytest.mark.parametrize(
    "value",
    [1e16, 1e-5, 7.186167636047485e-05, -4.8e-07, 1e22, 0.0001, 123456789012345.0, 2**64,
     -(2**63) - 1, {"1e5": "text 0.00001"}, {1: "int key"}, "\u2028\u2029\x00\x7f\"\\/é"],
)  # fmt: skip
def test_the_cases_orjson_writes_differently(value: Any) -> None:
    assert json_bytes(value) == stdlib_bytes(value)
