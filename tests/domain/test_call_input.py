"""A tool call's arguments are parsed once and read as before (issue 29)."""

from __future__ import annotations

import json

import pytest

from domain.call_input import MEMO_MAX_CHARS, arguments_json, forget, memo_sizes, tool_input

pytestmark = pytest.mark.quick


@pytest.mark.parametrize("call, expected", [
    (None, {}), ("", {}), ('{"path": "a.py", "n": 2}', {"path": "a.py", "n": 2}),
    ("[1, 2]", {"arguments": [1, 2]}), ("not json", {"arguments": "not json"}),
    ('"text"', {"arguments": "text"}),
])  # fmt: skip
def test_a_call_reads_as_its_arguments(call: str | None, expected: dict[str, object]) -> None:
    assert tool_input(call) == expected


def test_the_same_call_text_is_parsed_once_and_encoded_once() -> None:
    call = json.dumps({"z": 1, "a": [1, 2]})
    first = tool_input(call)
    assert tool_input("" + call) is first
    assert arguments_json(first) == json.dumps(first, sort_keys=True)
    assert arguments_json(first) is arguments_json(first)


def test_an_equal_dict_not_handed_out_is_encoded_as_itself() -> None:
    value = {"b": 1, "a": 2}
    assert arguments_json(value) == '{"a": 2, "b": 1}'
    value2 = {"b": 3}
    assert arguments_json(value2) == '{"b": 3}'


def test_forget_drops_what_was_parsed() -> None:
    call = '{"secret": "hunter2"}'
    first = tool_input(call)
    arguments_json(first)
    forget()
    assert memo_sizes() == (0, 0)
    assert tool_input(call) is not first


def test_a_long_call_is_parsed_every_time_not_held() -> None:
    forget()
    call = json.dumps({"text": "x" * MEMO_MAX_CHARS})
    first = tool_input(call)
    assert first == json.loads(call)
    assert tool_input(call) is not first
    assert arguments_json(first) == json.dumps(first, sort_keys=True)
    assert memo_sizes() == (0, 0)
