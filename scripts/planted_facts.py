"""Twenty facts planted in the coding-agent workload, and the check of each.

A long coding session holds a few facts the agent needs again much later:
the port the user asked for, the failing test's name, a decision the user
stated, a path, a setting on line 3 of a file it read, an error line, a
command's exit status, a version, an environment variable.  ``planted``
lays these into the seeded ``coding_workload`` at fixed turns spread across
the run (in user messages, assistant texts, tool calls and tool results, as
a real session carries them), so a benchmark can ask at the end whether
each is still in what the model is fed, or in what recall finds for the
fact's question.  Each fact has a question in natural words (never the
answer: it is the recall query) and an answer string checked verbatim, on
word boundaries, after ``normalize`` (lowercase, punctuation as spaces).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from scripts.coding_workload import Tool, Turn, filler, workload

_PUNCT = re.compile(r"[^\w\s]")


def normalize(text: str) -> str:
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


@dataclass(frozen=True)
class Fact:
    where: str  # user | assistant | read (line 3 of the file) | shell (a line of the output)
    text: str  # the message sentence, or the line of the tool result
    question: str
    answer: str
    target: str = ""  # read: the file's path; shell: the command


FACTS: tuple[Fact, ...] = (
    Fact("user", "Keep the dev server on port 8743, the proxy already owns 8080.",
         "Which port should the dev server listen on?", "8743"),
    Fact("shell", "FAILED tests/test_parser.py::test_keeps_trailing_token - AssertionError: "
         "assert 4 == 5", "Which test is failing in the parser suite?",
         "test_keeps_trailing_token", "pytest -q tests/test_parser.py"),
    Fact("read", "max_retries = 7  # the gateway gives up after this",
         "How many retries does the settings file allow?", "max_retries = 7",
         "config/settings.toml"),
    Fact("user", "Design decision: timestamps are stored as UTC epoch milliseconds, never as "
         "local time.", "How did we decide to store timestamps?", "UTC epoch milliseconds"),
    Fact("assistant", "The tokenizer that drops the token lives in src/lexer/scan_tokens.py.",
         "Which source file holds the tokenizer?", "src/lexer/scan_tokens.py"),
    Fact("shell", "ImportError: cannot import name 'LegacyCursor' from 'storage.cursor'",
         "Which name could not be imported when the CLI started?", "LegacyCursor",
         "python -m app.cli --help"),
    Fact("read", 'version = "2.14.3"', "What version is the package at?", "2.14.3",
         "pyproject.toml"),
    Fact("shell", "[make migrate exited with status 2]",
         "What happened when the database migration command ran?",
         "make migrate exited with status 2", "make migrate"),
    Fact("read", "PARSER_STRICT_MODE=1  # fail on unknown tokens",
         "Which environment variable turns on strict parsing?", "PARSER_STRICT_MODE",
         ".env.example"),
    Fact("user", "Don't use print for logging; this codebase uses structlog everywhere.",
         "Which logging library does the codebase use?", "structlog"),
    Fact("shell", "Switched to a new branch 'fix/trailing-token-2291'",
         "Which git branch is the work on?", "fix/trailing-token-2291",
         "git checkout -b fix/trailing-token-2291"),
    Fact("read", "DATABASE_URL=postgresql://app@db-staging.internal:6432/orders",
         "Which database host and port does staging use?", "db-staging.internal:6432",
         "config/staging.env"),
    Fact("assistant", "Found it: merge_spans() drops the last span when a line ends without "
         "a newline.", "Which function drops the last span?", "merge_spans"),
    Fact("user", "The CI job times out after 45 minutes, so keep the suite fast.",
         "After how long does the CI job time out?", "45 minutes"),
    Fact("shell", "4f9c2e1 Parser: keep the trailing token",
         "What is the hash of the latest commit?", "4f9c2e1", "git log -1 --oneline"),
    Fact("read", 'BUDGET_HEADER = "X-Request-Budget"',
         "Which HTTP header carries the request budget?", "X-Request-Budget",
         "src/http/client.py"),
    Fact("assistant", "This is upstream issue #4412 in the tokenizer library, fixed in their "
         "next release.", "Which upstream issue tracks the tokenizer bug?", "issue #4412"),
    Fact("shell", "TOTAL                     1843    212   88.4%",
         "What is the total test coverage?", "88.4%", "pytest --cov=src -q"),
    Fact("user", "Pin numpy to 1.26.4; the 2.x line breaks our C extension.",
         "Which numpy version must we pin?", "1.26.4"),
    Fact("user", "The release is due on 14 March, so nothing risky after the 10th.",
         "When is the release due?", "14 March"),
)  # fmt: skip


def fact_turns(turns: int, count: int = len(FACTS)) -> list[int]:
    """The turn of each fact: spread evenly from the 3rd turn to 8 turns before the end."""
    last = max(3, turns - 8)
    return [3 + (last - 3) * i // max(1, count - 1) for i in range(count)]


def plant(turn: Turn, fact: Fact, rng: random.Random, call_id: str) -> Turn:
    """``turn`` carrying ``fact``: in its message, or as one more tool call."""
    if fact.where == "user":
        return replace(turn, user=f"{fact.text} {turn.user or ''}".strip())
    if fact.where == "assistant":
        return replace(turn, assistant=f"{fact.text} {turn.assistant}")
    lines = filler(rng, rng.randrange(600, 3000)).splitlines()
    if fact.where == "read":
        lines.insert(2, fact.text)  # line 3 of the file
        tool = Tool(call_id, "read_file", {"path": fact.target}, "\n".join(lines))
    else:
        lines.insert(rng.randrange(len(lines) // 2, len(lines) + 1), fact.text)
        tool = Tool(call_id, "run_shell", {"cmd": fact.target}, "\n".join(lines))
    return replace(turn, tools=(*turn.tools, tool))


def planted(turns: int, session: int = 0,
            facts: tuple[Fact, ...] = FACTS) -> Iterator[tuple[Turn, list[Fact]]]:  # fmt: skip
    """The workload's turns with ``facts`` laid in, and the facts each turn planted."""
    at: dict[int, list[Fact]] = {}
    for fact, t in zip(facts, fact_turns(turns, len(facts)), strict=True):
        at.setdefault(t, []).append(fact)
    rng = random.Random(2000 + session)
    for t, turn in enumerate(workload(session, turns)):
        for k, fact in enumerate(at.get(t, [])):
            turn = plant(turn, fact, rng, f"call_{session}_{t}_fact{k}")
        yield turn, at.get(t, [])


def found(answer: str, texts: Iterable[str]) -> bool:
    """Whether ``answer`` occurs in one of ``texts``, normalized, on word boundaries."""
    needle = f" {normalize(answer)} "
    return needle.strip() != "" and any(needle in f" {normalize(t)} " for t in texts)
