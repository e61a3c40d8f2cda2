"""The coding-agent half of ``bench_retention``: do the 20 planted facts survive?

Drives the seeded coding-agent workload with its planted facts
(``scripts/planted_facts.py``) turn by turn into a session of a real
``Runtime`` on a temporary SQLite store, one ``append_nodes`` batch a turn
with auto-compaction as the API runs it, and at the end of the run asks of
each fact whether its answer is in the rendered OpenAI request (what the
model is fed), in that or the top-5 recall for the fact's question, and in
plain truncation: the latest nodes up to the same history limit.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scripts.coding_workload import ctx_nodes
from scripts.planted_facts import Fact, found, planted

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
CODING_TURNS = 170  # about 350 tool calls with the planted ones


@dataclass
class CodingResult:
    planted: list[Fact] = field(default_factory=list)  # in the order the run planted them
    tools: int = 0
    truncation: list[Fact] = field(default_factory=list)  # the facts each one kept
    render: list[Fact] = field(default_factory=list)
    recall: list[Fact] | None = None  # in the render or the top-5 recall; None: no recall
    used: float | None = None  # render's history tokens / limit, where it no longer all fits
    cut_used: float | None = None


def node_text(node: dict[str, Any]) -> str:
    """What a node puts before the model: its text, a tool's arguments and result."""
    parts = [node.get("input"), node.get("output")]
    return "\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts if p is not None)


def strings(value: Any) -> list[str]:
    """Every string in a rendered request (message texts, tool arguments, ...)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


@contextmanager
def bench_session(window: int, policy: Any) -> Iterator[tuple[Any, str]]:
    """A real ``Runtime`` on a temporary SQLite store, and a new session at ``window``."""
    from service.runtime import Runtime

    with tempfile.TemporaryDirectory() as folder:
        rt = Runtime(f"sqlite:///{folder}/bench.db", policy=policy)
        try:
            sid, _ = rt.execute("start_session", "bench", "openai:gpt-4o",
                                context_window=window, at=T0)  # fmt: skip
            yield rt, str(sid)
        finally:
            rt.close()


def fed(rt: Any, sid: str) -> tuple[str, int, int]:
    """What the model is fed at the head (the OpenAI request's message strings), the
    history limit and the history tokens the render uses."""
    request = rt.rendered(sid, "openai")["request"]
    budget = rt.budget(sid)
    text = "\n".join(strings(request.get("messages", [])))
    return text, int(budget["history"]), int(budget["used"]["history"])


def truncate(sizes: list[int], n: int, history: int) -> tuple[list[int], int]:
    """Plain truncation: the indexes of the latest of the first ``n`` items fitting
    ``history`` tokens, oldest first, and the tokens they take."""
    kept: list[int] = []
    spent = 0
    for index in range(n - 1, -1, -1):
        if spent + sizes[index] > history:
            break
        spent += sizes[index]
        kept.append(index)
    return kept[::-1], spent


def run_coding(window: int, policy: Any, turns: int = CODING_TURNS,
               recall: Callable[[Any, str, str], list[str] | None] | None = None,
               ) -> CodingResult:  # fmt: skip
    """The planted run at ``window``, checked at its end; ``recall(rt, sid, question)``
    gives the texts of the top-5 hits, or None where the runtime has no recall."""
    from domain.tokens import count_tokens

    result = CodingResult()
    texts: list[str] = []
    facts: list[Fact] = []
    with bench_session(window, policy) as (rt, sid):
        clock = T0
        system = "You are a careful software engineer. Work in small steps."
        rt.execute("append_node", sid, role="system", at=clock, input=system)
        for turn, planted_here in planted(turns):
            clock += timedelta(seconds=45)
            nodes = ctx_nodes(turn)
            rt.execute("append_nodes", sid, nodes, at=clock)
            texts.extend(node_text(n) for n in nodes)
            facts.extend(planted_here)
            result.tools += len(turn.tools)
        rendered, history, used = fed(rt, sid)
        render = [rendered]
        sizes = [count_tokens(t) for t in texts]
        kept_at, spent = truncate(sizes, len(texts), history)
        kept = [texts[i] for i in kept_at]
        if history and sum(sizes) > history:
            result.used = used / history
            result.cut_used = spent / history
        result.planted = facts
        for fact in facts:
            if found(fact.answer, kept):
                result.truncation.append(fact)
            in_render = found(fact.answer, render)
            if in_render:
                result.render.append(fact)
            hits = None if recall is None else recall(rt, sid, fact.question)
            if hits is not None:
                result.recall = result.recall if result.recall is not None else []
                if in_render or found(fact.answer, hits):
                    result.recall.append(fact)
    return result
