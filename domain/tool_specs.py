"""The tool definitions a request lists, and what they cost.

A session declares its tools (``ToolsDeclared``: name, description, JSON
schema); a tool the history used without a declaration is listed by name
with an open schema, as before declarations existed.  A tool whose every use
is folded into a summary stays listed unless the policy drops it
(``drop_summarized_tools``): the tool list is the most stable part of a
request, and the agent may call the tool again.  The render step lists
exactly ``listed_tools`` and the budget counts exactly ``definition_tokens``
of them, so ``/budget`` and ``/render`` cannot disagree.

With the policy's ``recall_tool`` on, every request also lists ``recall``
(``RECALL_SPEC``), which the agent runs against ``GET /sessions/{sid}/recall``
to read back what compaction folded; a declared tool of that name wins.
A session's own ``recall_tool`` (``POST /sessions/{sid}/compaction``)
overrides the policy both ways (``recall_listed``); the budget step and the
render both ask it, so they still list the same tools.
The client's ``ctxstore_client.recall_tool.RECALL_SPEC`` is the same
definition (a test checks; the domain imports nothing of the client).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from domain.context import Item
from domain.node_text import canonical_json
from domain.tokens import count_tokens

Spec = dict[str, Any]
DEFINITION_OVERHEAD = 8  # tokens a provider adds around one tool definition
OPEN_SCHEMA: Spec = {"type": "object"}
RECALL_SPEC: Spec = {
    "name": "recall",
    "description": (
        "Search this conversation's earlier content (folded into summaries, cleared or "
        "aged out of the context) by keywords: names, numbers, file paths, phrases. "
        "Returns the original text of the best matching turns and tool results."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
    },
}


def recall_listed(compaction: Mapping[str, Any] | None, policy_on: bool) -> bool:
    """Whether requests list ``recall``: the session's setting if it made one, else
    the policy's (``policy_on``, of the policy the commit is made under)."""
    chosen = compaction.get("recall_tool") if compaction else None
    return policy_on if chosen is None else bool(chosen)


def uses(items: Iterable[Item]) -> dict[str, bool]:
    """Tool name -> whether any use of it is still shown (not folded into a summary)."""
    seen: dict[str, bool] = {}
    for item in items:
        if item.role == "tool":
            name = item.name or "tool"
            seen[name] = seen.get(name, False) or item.state != "summarized"
    return seen


def listed_tools(used: Mapping[str, bool], declared: Sequence[Spec] = (),
                 drop_summarized: bool = False, recall: bool = False) -> list[Spec]:  # fmt: skip
    """Declared tools and the undeclared ones the history used (and ``recall``, when on),
    sorted by name: its place in the list is as stable as any other tool's."""
    out: dict[str, Spec] = {}
    for spec in declared:
        name = spec["name"]
        if not (drop_summarized and name in used and not used[name]):
            out[name] = spec
    # A declared ``recall`` wins (even once dropped); an undeclared one's uses list this.
    if recall and all(spec["name"] != RECALL_SPEC["name"] for spec in declared):
        out[RECALL_SPEC["name"]] = RECALL_SPEC
    for name, shown in used.items():
        if name not in out and (shown or not drop_summarized):
            out[name] = {"name": name}
    return [out[name] for name in sorted(out)]


def definition_tokens(specs: Iterable[Spec]) -> int:
    total = 0
    for spec in specs:
        total += count_tokens(spec["name"]) + DEFINITION_OVERHEAD
        if spec.get("description"):
            total += count_tokens(spec["description"])
        if "input_schema" in spec:
            total += count_tokens(canonical_json(spec["input_schema"]))
    return total
