"""The deterministic coding-agent workload the benchmarks share.

One seeded generator, so that ``bench_peers`` (ctxstore beside the Agents
SDK) and ``bench_retention`` (what compaction keeps) measure the same kind of
session: a user message every 10th turn; each turn an assistant text and 1-3
tool calls whose results are 0.2-20 kB (log-uniform), a third of them
re-reads of a file read before.  Equal arguments give equal turns.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tool:
    call_id: str
    name: str
    args: dict[str, Any]
    result: str


@dataclass(frozen=True)
class Turn:
    user: str | None
    assistant: str
    tools: tuple[Tool, ...]


_WORDS = ("def", "return", "self", "value", "import", "class", "for", "in", "if", "else", "None",
          "print", "list", "dict", "items", "key", "async", "await", "with", "open")  # fmt: skip


def filler(rng: random.Random, size: int) -> str:
    """Code-like lines of ``size`` characters, drawn from ``rng``."""
    lines, total = [], 0
    while total < size:
        line = "    " * rng.randrange(3) + " ".join(rng.choices(_WORDS, k=rng.randrange(3, 12)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size]


def workload(session: int, turns: int) -> Iterator[Turn]:
    """The same turns for every system: seeded by the session's index only."""
    rng = random.Random(1000 + session)
    files: dict[str, str] = {}
    for t in range(turns):
        user = f"Task {t // 10}: {filler(rng, rng.randrange(80, 600))}" if t % 10 == 0 else None
        tools = []
        for k in range(rng.randrange(1, 4)):
            call_id = f"call_{session}_{t}_{k}"
            if files and rng.random() < 1 / 3:  # a repeated file read
                path = rng.choice(sorted(files))
                tools.append(Tool(call_id, "read_file", {"path": path}, files[path]))
                continue
            size = int(math.exp(rng.uniform(math.log(200), math.log(20_000))))
            if rng.random() < 0.5:
                path = f"src/mod_{t}_{k}.py"
                files[path] = filler(rng, size)
                tools.append(Tool(call_id, "read_file", {"path": path}, files[path]))
            else:
                cmd = f"pytest -q tests/test_{t}.py"
                tools.append(Tool(call_id, "run_shell", {"cmd": cmd}, filler(rng, size)))
        yield Turn(user, filler(rng, rng.randrange(40, 400)), tuple(tools))


def ctx_nodes(turn: Turn) -> list[dict[str, Any]]:
    """A turn as ctxstore nodes (``POST /nodes/batch``, ``append_nodes``)."""
    nodes: list[dict[str, Any]] = []
    if turn.user is not None:
        nodes.append({"role": "user", "input": turn.user})
    nodes.append({"role": "assistant", "output": turn.assistant})
    for tool in turn.tools:
        nodes.append({"role": "tool", "name": tool.name, "input": tool.args,
                      "output": tool.result, "call_id": tool.call_id})  # fmt: skip
    return nodes
