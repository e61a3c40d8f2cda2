"""A request body as a pydantic model (``parse_body``): size, depth and duplicate keys
checked first, large bodies parsed off the event loop."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from api import limits
from api.errors import DuplicateKey, MalformedJSON
from api.json_skeleton import skeleton

M = TypeVar("M", bound=BaseModel)


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(f"request body names the key {key!r} twice in one object")
        seen[key] = value
    return seen


def check_structure(request: Request, raw: bytes) -> None:
    """Refuse a repeated key in one object (``DuplicateKey``; the model's parser would keep
    the last) or nesting deeper than the limit, in one pass of the stdlib parser.

    Depth is measured on what it parsed (a few containers, however large the
    texts in them): a separate byte scan of the body cost 6 ms per 8 MB with
    the GIL held.  A body the parser refuses (not JSON, or nested past the
    interpreter's recursion limit) gets the byte scan, then the model's parser
    says what is wrong with it.  A large body is checked through its skeleton
    (``json_skeleton``): the parser skips decoding megabytes of text it does
    not check.
    """
    shape = skeleton(raw) if len(raw) > PARSE_IN_THREAD_BYTES else None
    try:
        parsed = json.loads(shape or raw, object_pairs_hook=_refuse_duplicates)
    except (ValueError, RecursionError):
        limits.check_json(request, raw)
        return
    limits.check_depth(request, parsed)


# Parsing megabytes takes tens of milliseconds: off the event loop, where it would stall
# every other request; a small body is parsed in place (a thread hop costs more).
PARSE_IN_THREAD_BYTES = 64 * 1024


async def parse_body(request: Request, model: type[M]) -> M:
    """The body as ``model``; an empty body counts as ``{}``."""
    raw = await request.body()
    if len(raw) > PARSE_IN_THREAD_BYTES:
        return await run_in_threadpool(_parse, request, raw, model)
    return _parse(request, raw, model)


def _parse(request: Request, raw: bytes, model: type[M]) -> M:
    if not raw.strip():
        raw = b"{}"
    check_structure(request, raw)
    try:
        body = model.model_validate_json(raw)
    except ValidationError as exc:
        bad = [e for e in exc.errors(include_url=False) if e["type"] == "json_invalid"]
        if bad:
            raise MalformedJSON(f"request body is not valid JSON: {bad[0]['msg']}") from None
        raise
    limits.check_content(request, body)
    return body
