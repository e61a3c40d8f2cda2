"""Query strings, as pydantic models (``parse_query``).

Query strings are text, so these models coerce (``?limit=5``), unlike the
strict request bodies of ``api.schemas``; an unknown parameter is refused.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from starlette.requests import Request

from projections.session_queries import decode_cursor

M = TypeVar("M", bound=BaseModel)


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EventsQuery(Query):
    after: int = Field(0, ge=0, le=2**63 - 1,
                       description="return events with originator version > after")  # fmt: skip
    limit: int = Field(100, ge=1, le=1000)


def _cursor(value: str | None) -> str | None:
    if value is not None:
        decode_cursor(value)  # ValueError: a 422 naming the parameter
    return value


class SessionsQuery(Query):
    after: Annotated[str | None, AfterValidator(_cursor)] = Field(
        None, description="the `next` cursor of the previous page"
    )
    limit: int = Field(100, ge=1, le=1000)  # fmt: skip


class NodesQuery(Query):
    head: str | None = Field(None, description="the branch's last node (default: HEAD)")


class RecallQuery(Query):
    q: str = Field(
        min_length=1,
        max_length=2000,
        description="what to look for: words, names, paths (any state, ORed)",
    )
    limit: int = Field(5, ge=1, le=50, description="how many hits, best first")
    hidden: bool = Field(
        False,
        description="only nodes the model cannot read in full now: aged, cleared, summarized, "
        "or not in the render at all (what the recall tool asks for)",
    )


class RenderQuery(Query):
    shape: Literal["neutral", "openai", "anthropic", "responses", "gemini", "bedrock"] = "neutral"
    commit: str | None = None
    cache: bool = Field(
        False,
        description="anthropic and bedrock shapes: add prompt-cache breakpoints "
        "(cache_control, cachePoint) after the tools, the system prompt and the last message",
    )


class StreamQuery(Query):
    once: bool = Field(False, description="send the current state, then close")
    interval: float = Field(0.25, ge=0.05, le=10,
                            description="least seconds between two change frames")  # fmt: skip


class EmptyQuery(Query):
    pass


class EraseTenantQuery(Query):
    confirm: str = Field(min_length=1, max_length=64,
                         description="the caller's tenant again, or nothing is erased")  # fmt: skip


def parse_query(request: Request, model: type[M]) -> M:
    return model.model_validate(dict(request.query_params))
