"""How much of each request a provider's prompt cache can reuse, batching on and off.

Drives the same 300-call coding-agent session (seeded, so every run is the
same) through a real ``Runtime`` on a temporary SQLite store, with
auto-compaction by the offline summarizer, as the API runs it, for each
window (128k and 16k by default) and each policy: today's default
(aging and idle clearing batched, ``batch_trigger`` / ``clear_at_least``)
and the same rules with batching off (both 0: a tool ages the turn it
leaves the tail).  At every model call it renders the Anthropic request at
the head and compares it with the previous call's, block by block in the
order the cache reads them (tools, system, then each message's blocks):

* ``append``: the previous request is a prefix of this one;
* ``reuse``: the share of this request's tokens in the prefix the two share
  (what a cache could serve).

The same is measured for the OpenAI Responses and Gemini shapes of the same
requests (``--shapes``), unit by unit in the order their prefix caches read
them (tools, instructions, then each input item or content part); they cache
any prefix automatically, with no breakpoints and no write price, so only
reuse, append-only and input cost apply to them.

Then per configuration: the median reuse, the share of append-only calls,
and the cost of all calls' input with cached tokens at 10% of the price,
relative to paying for every token.  A provider only reads the cache at its
breakpoints (Anthropic: after the tools, the system prompt and the last
message, as ``cache=true`` renders them), and writing an entry costs 1.25x:
``breakpoint reuse`` is the share read from a breakpoint the previous call
wrote, and ``cost with writes`` the input bill with reads at 10% and every
other token written at 125%, relative to no cache at all, next to the
absolute bill in thousands of token-equivalents.

    python scripts/bench_cache.py [--calls 300] [--windows 128000,16000] [--quiet]
                                  [--shapes anthropic,responses,gemini]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_shared_tiktoken = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared_tiktoken.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared_tiktoken)

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
CACHED_PRICE = 0.10
WRITE_PRICE = 1.25
TOOLS = ("read_file", "grep", "bash", "edit_file", "list_dir")


@dataclass
class Result:
    label: str
    shape: str = "anthropic"
    calls: list[tuple[bool, float, int]] = field(default_factory=list)  # append, reuse, tokens
    cost: float = 0.0
    full_cost: int = 0
    over_window: int = 0
    breakpoint_reuse: list[float] = field(default_factory=list)
    written_cost: float = 0.0

    def summary(self) -> dict[str, Any]:
        reuse = [r for _, r, _ in self.calls[1:]]
        appended = sum(1 for a, _, _ in self.calls[1:] if a)
        breakpoints = self.shape == "anthropic"
        return {
            "config": self.label,
            "shape": self.shape,
            "calls": len(self.calls),
            "median reuse": f"{statistics.median(reuse):.1%}" if reuse else "-",
            "append-only": f"{appended / max(1, len(self.calls) - 1):.1%}",
            "input cost": f"{self.cost / max(1, self.full_cost):.1%}",
            "breakpoint reuse": f"{statistics.median(self.breakpoint_reuse[1:]):.1%}"
            if breakpoints and len(self.breakpoint_reuse) > 1
            else "-",
            "cost with writes": f"{self.written_cost / max(1, self.full_cost):.1%}"
            if breakpoints
            else "-",
            "billed k tok": f"{self.written_cost / 1000:,.0f} of {self.full_cost / 1000:,.0f}"
            if breakpoints
            else f"{self.cost / 1000:,.0f} of {self.full_cost / 1000:,.0f}",
            "over window": self.over_window,
        }


def result_size(rng: random.Random) -> int:
    """Tool output in chars: mostly small, some files and test runs, a few huge dumps."""
    roll = rng.random()
    if roll < 0.6:
        return rng.randint(200, 2_000)
    if roll < 0.9:
        return rng.randint(2_000, 8_000)
    return rng.randint(8_000, 20_000)


def output(rng: random.Random, call: int, size: int) -> str:
    words = ("def", "return", "self", "value", "assert", "import", "class", "None", "if", "for")
    lines = []
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(
            f"{call:04d}: " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        )
    return "\n".join(lines)[:size]


def blocks(request: dict[str, Any]) -> tuple[list[str], list[int]]:
    """The request as the cache reads it (tools, system, then each message's blocks),
    and the block counts at which it has a ``cache_control`` breakpoint."""
    out: list[str] = []
    breakpoints: list[int] = []

    def add(block: Any, text: str) -> None:
        out.append(text)
        if isinstance(block, dict) and "cache_control" in block:
            breakpoints.append(len(out))

    for tool in request.get("tools", []):
        add(tool, json.dumps({k: v for k, v in tool.items() if k != "cache_control"},
                             sort_keys=True))  # fmt: skip
    system = request.get("system")
    if isinstance(system, list):
        for block in system:
            add(block, json.dumps([{k: v for k, v in block.items() if k != "cache_control"}],
                                  sort_keys=True))  # fmt: skip
    elif system:
        out.append(json.dumps(system, sort_keys=True))
    for message in request["messages"]:
        for block in message["content"]:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            add(block, json.dumps([message["role"], plain], sort_keys=True))
    return out, breakpoints


def units(shape: str, request: dict[str, Any]) -> list[str]:
    """A Responses or Gemini request as its prefix cache reads it, unit by unit."""
    out = [json.dumps(tool, sort_keys=True) for tool in request.get("tools", [])]
    if shape == "responses":
        if request.get("instructions"):
            out.append(json.dumps(request["instructions"]))
        out.extend(json.dumps(item, sort_keys=True) for item in request["input"])
        return out
    if "systemInstruction" in request:
        out.append(json.dumps(request["systemInstruction"], sort_keys=True))
    for content in request["contents"]:
        out.extend(json.dumps([content["role"], part], sort_keys=True)
                   for part in content["parts"])  # fmt: skip
    return out


class Measured(NamedTuple):
    appended: bool
    reuse: float
    total: int
    sizes: list[int]
    shared: int


def measure(result: Result, previous: list[str], current: list[str]) -> Measured:
    """Append-only, reuse and size of one call against the previous one, into ``result``.

    Also hands back each unit's tokens and the shared prefix's length, for the caller that
    prices cache writes at breakpoints."""
    from domain.tokens import count_tokens

    sizes = [count_tokens(b) for b in current]
    shared = 0
    while (shared < len(previous) and shared < len(current)
           and previous[shared] == current[shared]):  # fmt: skip
        shared += 1
    total = sum(sizes)
    cached = sum(sizes[:shared])
    appended = bool(previous) and shared == len(previous)
    reuse = cached / total if total else 1.0
    result.calls.append((appended, reuse, total))
    result.cost += cached * CACHED_PRICE + (total - cached)
    result.full_cost += total
    return Measured(appended, reuse, total, sizes, shared)


def run(label: str, window: int, policy: Any, calls: int, seed: int, quiet: bool,
        shapes: tuple[str, ...] = ("anthropic",)) -> list[Result]:  # fmt: skip
    from service.runtime import Runtime

    result = Result(label)
    others = {shape: Result(label, shape) for shape in shapes if shape != "anthropic"}
    last: dict[str, list[str]] = {shape: [] for shape in others}
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder:
        rt = Runtime(f"sqlite:///{folder}/bench.db", policy=policy)
        try:
            sid, _ = rt.execute("start_session", "bench", "anthropic:claude-sonnet-4",
                                context_window=window, at=T0)  # fmt: skip
            clock = T0

            def append(role: str, **kw: Any) -> None:
                rt.execute("append_node", sid, role=role, at=clock, **kw)

            append("system", input="You are a careful software engineer. Work in small steps.")
            append("user", input="The parser drops the last token of every line. Fix it, "
                   "with a test, without breaking the other tests.")  # fmt: skip
            previous: list[str] = []
            written: list[int] = []
            for call in range(calls):
                if call and call % 40 == 0:
                    append("user", input=f"Also: check case {call // 40}, and keep it fast.")
                for shape, other in others.items():
                    current_units = units(shape, rt.rendered(str(sid), shape)["request"])
                    measure(other, last[shape], current_units)
                    last[shape] = current_units
                request = rt.rendered(str(sid), "anthropic", cache=True)
                result.over_window += bool(request["over_window"])
                current, breakpoints = blocks(request["request"])
                appended, reuse, total, sizes, shared = measure(result, previous, current)
                # read only up to a breakpoint the previous call wrote; the rest written
                read = sum(sizes[: max((b for b in written if b <= shared), default=0)])
                result.breakpoint_reuse.append(read / total if total else 1.0)
                result.written_cost += read * CACHED_PRICE + (total - read) * WRITE_PRICE
                written = breakpoints
                if not quiet:
                    print(
                        f"{label:<28} call {call:3d}  {total:7,d} tokens  "
                        f"{'append' if appended else 'CHANGED':7}  reuse {reuse:6.1%}"
                    )
                previous = current
                # the model answers: one or two tool calls, or (rarely) just text
                clock += timedelta(seconds=rng.randint(20, 90))
                append("assistant", output=f"Step {call}: looking at the next piece.")
                for _ in range(1 if rng.random() < 0.8 else 2):
                    tool = rng.choice(TOOLS)
                    append("tool", name=tool, input={"path": f"src/mod{rng.randint(1, 40)}.py"},
                           output=output(rng, call, result_size(rng)))  # fmt: skip
        finally:
            rt.close()
    return [result, *others.values()] if "anthropic" in shapes else list(others.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--windows", default="128000,16000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quiet", action="store_true", help="only the summary")
    parser.add_argument("--policy", default="{}", help="JSON overrides for 'batching on'")
    parser.add_argument("--shapes", default="anthropic,responses,gemini",
                        help="the shapes measured, of anthropic, responses, gemini")  # fmt: skip
    args = parser.parse_args(argv)
    shapes = tuple(s.strip() for s in args.shapes.split(",") if s.strip())
    from domain.policy import Policy

    batched = Policy.from_json(args.policy)
    unbatched = Policy(batch_trigger=0.0, clear_at_least=0)
    results = []
    for window in (int(w) for w in args.windows.split(",")):
        for name, policy in (("batching on", batched), ("batching off", unbatched)):
            label = f"{window // 1000}k, {name}"
            results.extend(run(label, window, policy, args.calls, args.seed, args.quiet, shapes))
    rows = [r.summary() for r in results]
    columns = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in columns]
    print()
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(str(row[c]).ljust(w) for c, w in zip(columns, widths, strict=True)))
    print(f"\n(input cost: all calls' input tokens with cached ones at {CACHED_PRICE:.0%} of "
          "the price, relative to paying for every token; cost with writes: read only at "
          "the previous call's breakpoints, every other token written at "
          f"{WRITE_PRICE:.0%}; responses and gemini cache any prefix by themselves, so "
          "their billed k tok is the input cost's)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
