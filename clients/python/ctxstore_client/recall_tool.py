"""The ``recall`` tool: the model asks for what compaction folded away, by keywords.

A session whose policy has ``recall_tool`` on lists this definition in every
render (the server's ``domain.tool_specs.RECALL_SPEC`` equals ``RECALL_SPEC``
here, which a test checks: the client distribution imports nothing of the
server).  When the model calls it, the agent runs it with ``run_recall`` (or
``run_recall_async``), which asks ``GET /sessions/{sid}/recall`` and returns
the hits as text for the model to read; the call and that text are stored
like any other tool call, as a tool node.  It asks with ``hidden=true``: only
what the model cannot read in full now (aged, cleared, summarized, or not
rendered), so the few hits are not spent on the question it just asked or on
the pending call itself.

Bad arguments are answered, not raised: a tool result is read by the model,
which can fix its call, while an exception would end the agent's run.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from ctxstore_client.errors import InvalidRequest

RECALL_NAME = "recall"
RECALL_DESCRIPTION = (
    "Search this conversation's earlier content (folded into summaries, cleared or "
    "aged out of the context) by keywords: names, numbers, file paths, phrases. "
    "Returns the original text of the best matching turns and tool results."
)
MAX_LIMIT = 20
RECALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    },
    "required": ["query"],
}
RECALL_SPEC: dict[str, Any] = {
    "name": RECALL_NAME,
    "description": RECALL_DESCRIPTION,
    "input_schema": RECALL_SCHEMA,
}
DEFAULT_LIMIT = 5
EXAMPLE = json.dumps({"query": "invoice number for ACME", "limit": 5})
TEXT_CAP = 2_000  # characters of one hit shown: a few hits, not a transcript


class Recaller(Protocol):
    def recall(self, session_id: str, q: str, limit: int = 5, hidden: bool = False) -> Any: ...


class AsyncRecaller(Protocol):
    def recall(
        self, session_id: str, q: str, limit: int = 5, hidden: bool = False
    ) -> Awaitable[Any]: ...


def parse_arguments(arguments: str | Mapping[str, Any] | None) -> tuple[str, int] | str:
    """``(query, limit)`` from the model's arguments (a JSON string or an object), or the
    error text to answer with."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return "error: recall takes a JSON object of arguments, like " + EXAMPLE
    if not isinstance(arguments, Mapping):
        return "error: recall takes an object of arguments, like " + EXAMPLE
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return "error: recall needs a non-empty 'query' string of keywords to search for"
    limit = arguments.get("limit", DEFAULT_LIMIT)
    if limit is None:
        limit = DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return f"error: recall's 'limit' must be an integer from 1 to {MAX_LIMIT}"
    return query.strip(), limit


def format_hits(query: str, answer: Any) -> str:
    """The hits as compact text: one block per node, its id, role, state, then its text."""
    hits = list(getattr(answer, "hits", None) or [])
    if not hits:
        return f"recall: nothing earlier in this conversation matches {query!r}"
    lines = [f"recall: {len(hits)} earlier item(s) matching {query!r}, best first"]
    for hit in hits:
        text = str(hit.text)
        if len(text) > TEXT_CAP:
            text = text[:TEXT_CAP] + f" [... {len(text) - TEXT_CAP} more characters]"
        lines.append(f"[node {hit.node_id} | {hit.role} | {hit.state}]\n{text}")
        after = str(getattr(hit, "next_text", "") or "")
        if after:
            lines[-1] += f"\n[next] {after}"
    return "\n\n".join(lines)


def _refused(exc: InvalidRequest) -> str:
    return f"error: recall refused: {exc.message}"


def run_recall(client: Recaller, session_id: str,
               arguments: str | Mapping[str, Any] | None) -> str:  # fmt: skip
    """Run one ``recall`` call of the model's (``arguments`` as it gave them); the result text."""
    parsed = parse_arguments(arguments)
    if isinstance(parsed, str):
        return parsed
    query, limit = parsed
    try:
        answer = client.recall(session_id, query, limit=limit, hidden=True)
    except InvalidRequest as exc:
        return _refused(exc)
    return format_hits(query, answer)


async def run_recall_async(client: AsyncRecaller, session_id: str,
                           arguments: str | Mapping[str, Any] | None) -> str:  # fmt: skip
    """``run_recall`` over an ``AsyncClient``."""
    parsed = parse_arguments(arguments)
    if isinstance(parsed, str):
        return parsed
    query, limit = parsed
    try:
        answer = await client.recall(session_id, query, limit=limit, hidden=True)
    except InvalidRequest as exc:
        return _refused(exc)
    return format_hits(query, answer)
