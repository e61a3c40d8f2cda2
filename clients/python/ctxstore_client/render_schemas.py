"""The rendered ``request`` of ``/render``, typed per shape for ``/openapi.json``.

The server builds requests as plain JSON (``domain.render*``); these models
only describe them, so the document tells a client what each shape holds.
``Rendered.request`` stays a plain object in Python (a client reads it as the
provider's own JSON) and is documented as ``anyOf`` these, with the answer's
``shape`` choosing the one that applies (``if``/``then``): a schema
discriminated by ``shape``.  Every model allows
additional properties: a provider field added later is not a violation.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ReqBlock(_Open):
    """An Anthropic-style content block (text, image, document, tool_use, tool_result,
    thinking, redacted_thinking, compaction, reasoning)."""

    type: str


class ReqMessage(_Open):
    role: Literal["user", "assistant"]
    content: list[ReqBlock]


class ReqSpec(_Open):
    name: str


class NeutralRequest(_Open):
    system: str
    messages: list[ReqMessage]
    tools: list[ReqSpec]


class AnthropicTool(_Open):
    name: str
    input_schema: dict[str, Any]


class AnthropicRequest(_Open):
    model: str
    messages: list[ReqMessage]
    system: str | list[ReqBlock] = ""
    tools: list[AnthropicTool] = []


class ChatMessage(_Open):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None


class ChatTool(_Open):
    type: Literal["function"]
    function: dict[str, Any]


class OpenAIChatRequest(_Open):
    model: str
    messages: list[ChatMessage]
    tools: list[ChatTool] = []


class ResponsesItem(_Open):
    """``message``, ``function_call``, ``function_call_output``, ``reasoning`` or ``compaction``."""

    type: Literal["message", "function_call", "function_call_output", "reasoning", "compaction"]


class ResponsesTool(_Open):
    type: Literal["function"]
    name: str
    parameters: dict[str, Any]


class ResponsesRequest(_Open):
    model: str
    input: list[ResponsesItem]
    instructions: str = ""
    tools: list[ResponsesTool] = []


class GeminiPart(_Open):
    """One of ``text``, ``inlineData``, ``functionCall``, ``functionResponse``;
    ``thoughtSignature`` where Gemini gave one."""

    text: str = ""
    inlineData: dict[str, str] = {}
    functionCall: dict[str, Any] = {}
    functionResponse: dict[str, Any] = {}
    thoughtSignature: str = ""


class GeminiContent(_Open):
    role: Literal["user", "model"]
    parts: list[GeminiPart]


class GeminiSystem(_Open):
    parts: list[GeminiPart]


class GeminiTool(_Open):
    functionDeclarations: list[dict[str, Any]]


class GeminiRequest(_Open):
    contents: list[GeminiContent]
    systemInstruction: GeminiSystem | None = None
    tools: list[GeminiTool] = []


class BedrockMessage(_Open):
    role: Literal["user", "assistant"]
    content: list[dict[str, Any]]


class BedrockToolConfig(_Open):
    tools: list[dict[str, Any]]


class BedrockRequest(_Open):
    modelId: str
    messages: list[BedrockMessage]
    system: list[dict[str, Any]] = []
    toolConfig: BedrockToolConfig | None = None


BY_SHAPE: dict[str, type[BaseModel]] = {
    "neutral": NeutralRequest,
    "anthropic": AnthropicRequest,
    "openai": OpenAIChatRequest,
    "responses": ResponsesRequest,
    "gemini": GeminiRequest,
    "bedrock": BedrockRequest,
}


def _marked(node: Any) -> Any:
    """Refs as ``x-ref`` markers: pydantic refuses refs it did not make in a model's
    schema; ``api.openapi`` turns them back into component refs."""
    if isinstance(node, dict):
        if "$ref" in node:
            return {"x-ref": node["$ref"].rsplit("/", 1)[-1]}
        return {k: _marked(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_marked(v) for v in node]
    return node


def request_schema() -> dict[str, Any]:
    """``anyOf`` the shapes' requests, their models under ``x-defs``."""
    models = tuple(BY_SHAPE.values())
    defs: dict[str, Any] = {}
    for model in models:
        schema = TypeAdapter(model).json_schema()
        defs.update(schema.pop("$defs", {}))
        defs[model.__name__] = schema
    return {
        "anyOf": [{"x-ref": m.__name__} for m in models],
        "description": "the provider request; its schema is the one the answer's shape names",
        "x-defs": _marked(defs),
    }


def shape_rules() -> list[dict[str, Any]]:
    """``if shape is X then request is X's request``, for each shape."""
    return [
        {
            "if": {"properties": {"shape": {"const": shape}}, "required": ["shape"]},
            "then": {"properties": {"request": {"x-ref": model.__name__}}},
        }
        for shape, model in BY_SHAPE.items()
    ]
