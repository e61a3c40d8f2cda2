"""The ``recall`` tool definition: listed in every shape only when the policy says so.

Its place in the tool list is the sorted one (the prefix stays put as
tools come and go), a declared ``recall`` wins, the budget counts exactly
what is listed, and every shape's provider library accepts it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxstore_client.recall_tool import RECALL_SPEC as CLIENT_SPEC
from domain.policy import DEFAULT_POLICY, Policy
from domain.render import SHAPES, render_shape
from domain.tool_specs import RECALL_SPEC, definition_tokens, listed_tools
from tests.domain.test_render import MODEL, check_anthropic, check_openai, commit, sample
from tests.projections.test_drop_in_requests import anthropic_ok, openai_ok
from tests.shape_checks import CHECKS

SEARCH = {"name": "search", "description": "Search the web.",
          "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}  # fmt: skip


def names(request: dict[str, Any], shape: str) -> list[str]:
    """The listed tools' names, wherever the shape puts them."""
    tools = request.get("tools", [])
    if shape == "openai":
        return [t["function"]["name"] for t in tools]
    if shape == "gemini":
        return [d["name"] for t in tools for d in t["functionDeclarations"]]
    if shape == "bedrock":
        return [t["toolSpec"]["name"] for t in request.get("toolConfig", {}).get("tools", [])]
    return [t["name"] for t in tools]


def test_the_server_and_the_client_list_one_definition() -> None:
    assert RECALL_SPEC == CLIENT_SPEC
    assert RECALL_SPEC["input_schema"] == {
        "type": "object",
        "properties": {"query": {"type": "string"},
                       "limit": {"type": "integer", "minimum": 1, "maximum": 20}},
        "required": ["query"],
    }  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_lists_recall_only_when_on(shape: str) -> None:
    c = commit(sample())
    off = render_shape(c, shape, MODEL)
    on = render_shape(c, shape, MODEL, recall_tool=True)
    assert "recall" not in names(off, shape)
    listed = names(on, shape)
    assert listed == sorted(names(off, shape) + ["recall"])  # sorted, like any tool
    assert json.dumps(on) == json.dumps(render_shape(c, shape, MODEL, recall_tool=True))
    if shape in CHECKS:
        CHECKS[shape](on)
    if shape == "anthropic":
        check_anthropic(on)
        anthropic_ok(on)
        assert {"name": "recall", "description": RECALL_SPEC["description"],
                "input_schema": RECALL_SPEC["input_schema"]} in on["tools"]  # fmt: skip
    if shape == "openai":
        check_openai(on)
        openai_ok(on)
        (fn,) = [t["function"] for t in on["tools"] if t["function"]["name"] == "recall"]
        assert fn["parameters"] == RECALL_SPEC["input_schema"]
    assert RECALL_SPEC["description"] in json.dumps(on)


def test_a_declared_recall_wins_and_is_listed_once() -> None:
    mine = {"name": "recall", "description": "My own recall.", "input_schema": {"type": "object"}}
    listed = listed_tools({"recall": True}, [SEARCH, mine], recall=True)
    assert listed == [mine, SEARCH]
    # even dropped (its every use summarized), the built-in one does not stand in for it
    assert listed_tools({"recall": False}, [mine], drop_summarized=True, recall=True) == []
    # undeclared uses of it: the full definition, not the open stand-in
    assert listed_tools({"recall": True, "grep": True}, recall=True) == [
        {"name": "grep"}, RECALL_SPEC]  # fmt: skip
    assert listed_tools({"recall": True}) == [{"name": "recall"}]


def test_the_budget_counts_what_the_render_lists() -> None:
    on = listed_tools({"grep": True}, [SEARCH], recall=True)
    off = listed_tools({"grep": True}, [SEARCH])
    assert definition_tokens(on) - definition_tokens(off) == definition_tokens([RECALL_SPEC]) > 20


def test_the_policy_field_leaves_the_default_digest_alone() -> None:
    assert Policy().recall_tool is False
    assert Policy.from_json('{"recall_tool": false}').rules_version == DEFAULT_POLICY.rules_version
    on = Policy.from_json('{"recall_tool": true}')
    assert on.recall_tool and on.rules_version != DEFAULT_POLICY.rules_version
    assert Policy.from_record(DEFAULT_POLICY.to_json()).recall_tool is False
    with pytest.raises(ValueError, match="recall_tool must be true or false"):
        Policy.from_json('{"recall_tool": 1}')
