"""Each rendered shape checked by the provider's own library, and for orphan tool pairs.

* ``responses``: ``openai``'s ``ResponseCreateParamsNonStreaming`` (its JSON
  schema, as ``tests.projections.test_drop_in_requests`` checks Chat);
* ``gemini``: ``google-genai``'s pydantic models (``Content``, ``Tool``), which
  refuse unknown fields;
* ``bedrock``: botocore's ``ParamValidator`` over the ``bedrock-runtime``
  service model's ``Converse`` input shape.
"""

from __future__ import annotations

import functools
import json
from typing import Any


@functools.cache
def _responses_validator() -> Any:
    import jsonschema
    from openai.types.responses.response_create_params import (
        ResponseCreateParamsNonStreaming,
    )
    from pydantic import TypeAdapter

    schema = TypeAdapter(ResponseCreateParamsNonStreaming).json_schema()
    return jsonschema.Draft202012Validator(schema)


def responses_ok(request: dict[str, Any]) -> None:
    found = sorted(_responses_validator().iter_errors(request), key=str)
    assert not found, [e.message[:300] for e in found[:3]]
    open_calls: list[str] = []
    answered: set[str] = set()
    for item in request["input"]:
        if item["type"] == "function_call":
            assert item["call_id"] not in open_calls and item["call_id"] not in answered
            open_calls.append(item["call_id"])
            assert isinstance(json.loads(item["arguments"]), dict)
        elif item["type"] == "function_call_output":
            assert item["call_id"] in open_calls, f"an orphan output {item['call_id']}"
            open_calls.remove(item["call_id"])
            answered.add(item["call_id"])
        else:
            assert not open_calls, f"unanswered calls {open_calls}"
    assert not open_calls, f"unanswered calls {open_calls}"
    assert request.get("tools", [1]), "no empty tools array"


def gemini_ok(request: dict[str, Any]) -> None:
    from google.genai import types

    assert set(request) <= {"contents", "systemInstruction", "tools"}
    for content in request["contents"]:
        types.Content.model_validate(content)
    if "systemInstruction" in request:
        types.Content.model_validate(request["systemInstruction"])
    for tool in request.get("tools", []):
        types.Tool.model_validate(tool)
    contents = request["contents"]
    for index, content in enumerate(contents):
        assert content["role"] in ("user", "model") and content["parts"]
        if index:
            assert content["role"] != contents[index - 1]["role"], "turns alternate"
        calls = [p["functionCall"]["name"] for p in content["parts"] if "functionCall" in p]
        answers = [p["functionResponse"]["name"] for p in content["parts"]
                   if "functionResponse" in p]  # fmt: skip
        if calls:
            assert content["role"] == "model"
            following = contents[index + 1]["parts"] if index + 1 < len(contents) else []
            replies = [p["functionResponse"]["name"] for p in following
                       if "functionResponse" in p]  # fmt: skip
            assert replies == calls, "each call answered, in order"
        if answers:
            assert content["role"] == "user" and index
            before = [p["functionCall"]["name"] for p in contents[index - 1]["parts"]
                      if "functionCall" in p]  # fmt: skip
            assert before == answers, "no orphan function response"


@functools.cache
def _converse_shape() -> Any:
    import botocore.session

    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    return model.operation_model("Converse").input_shape


def bedrock_ok(request: dict[str, Any]) -> None:
    from botocore.validate import ParamValidator

    report = ParamValidator().validate(request, _converse_shape())
    assert not report.has_errors(), report.generate_report()[:600]
    messages = request["messages"]
    for index, message in enumerate(messages):
        if index:
            assert message["role"] != messages[index - 1]["role"], "turns alternate"
        uses = [b["toolUse"]["toolUseId"] for b in message["content"] if "toolUse" in b]
        results = [b["toolResult"]["toolUseId"] for b in message["content"] if "toolResult" in b]
        if uses:
            assert message["role"] == "assistant" and index + 1 < len(messages)
            following = [b["toolResult"]["toolUseId"] for b in messages[index + 1]["content"]
                         if "toolResult" in b]  # fmt: skip
            assert following == uses, "each toolUse answered by the next message"
        if results:
            before = [b["toolUse"]["toolUseId"] for b in messages[index - 1]["content"]
                      if "toolUse" in b]  # fmt: skip
            assert results == before, "no orphan toolResult"
        for block in message["content"]:
            if "text" in block:
                assert block["text"].strip(), "Converse refuses blank text"


CHECKS = {"responses": responses_ok, "gemini": gemini_ok, "bedrock": bedrock_ok}
