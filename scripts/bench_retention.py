"""How many facts survive in what the model is fed: ctxstore against plain truncation.

Replays LoCoMo conversations (``../shared/locomo/``, see its README) turn by
turn into a session of a real ``Runtime`` on a temporary SQLite store, with
auto-compaction by the default (offline) summarizer, as the API runs it.
At checkpoints every 50 turns from turn 100 it renders the head (the
OpenAI request: exactly what the model is fed) and, for each question
whose evidence turns all precede the checkpoint, asks whether the answer
is still in the render.  Plain truncation is the same conversation cut to
its latest turns up to the same history limit (``budget.history``), checked
the same way.  A question counts only where its answer is in the whole
conversation so far (neither method could keep it otherwise); category 5
(adversarial: no answer in the conversation) is left out.

An answer matches a text when, both normalized (lowercase, punctuation
stripped, whitespace collapsed), the answer string occurs in it or every
answer token does.

Printed per window: checks, kept by truncation and by ctxstore, the loss
ratio (ctxstore misses / truncation misses: under 1.0 ctxstore loses fewer
answers) and the share of the history limit the render used, on average
over the checkpoints where the conversation so far no longer fits it.

    python scripts/bench_retention.py [--quick] [--windows 8000,16000] [--policy JSON]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_shared_tiktoken = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared_tiktoken.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared_tiktoken)

# ``../shared/locomo`` beside the checkout, or beside the folder of worktrees holding it
_PLACES = (ROOT.parent / "shared" / "locomo", ROOT.parent.parent / "shared" / "locomo")
DATA = next((d for d in _PLACES if d.is_dir()), _PLACES[0])
T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
FIRST_CHECK, EVERY = 100, 50
_PUNCT = re.compile(r"[^\w\s]")


def normalize(text: str) -> str:
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def matches(answer: str, text: str, tokens: set[str]) -> bool:
    """``text`` normalized, ``tokens`` its token set; ``answer`` already normalized."""
    if not answer:
        return False
    return answer in text or all(t in tokens for t in answer.split())


@dataclass
class Turn:
    dia_id: str
    role: str
    text: str


def turns_of(conv: dict[str, Any]) -> list[Turn]:
    """Every turn in order; a session's first turn carries its date, a photo its caption."""
    out: list[Turn] = []
    a = conv["speaker_a"]
    n = 1
    while f"session_{n}" in conv:
        when = conv.get(f"session_{n}_date_time", "")
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            if i == 0 and when:
                text = f"({when}) {text}"
            role = "user" if turn["speaker"] == a else "assistant"
            out.append(Turn(turn["dia_id"], role, text))
        n += 1
    return out


def questions(conv: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(normalized answer, evidence ids) of each question with an answer (category 5 out)."""
    out = []
    for qa in conv["qa"]:
        if qa.get("category") == 5 or "answer" not in qa:
            continue
        answer = normalize(str(qa["answer"]))
        if answer and qa.get("evidence"):
            out.append((answer, [str(e) for e in qa["evidence"]]))
    return out


def strings(value: Any) -> list[str]:
    """Every string in a rendered request (message texts, tool arguments, ...)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


@dataclass
class Tally:
    checks: int = 0
    truncation: int = 0
    ctxstore: int = 0
    used: list[float] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.checks += other.checks
        self.truncation += other.truncation
        self.ctxstore += other.ctxstore
        self.used.extend(other.used)


def replay(name: str, conv: dict[str, Any], window: int, policy: Any) -> Tally:
    from domain.tokens import count_tokens
    from service.runtime import Runtime

    turns = turns_of(conv)
    qas = questions(conv)
    position = {t.dia_id: i for i, t in enumerate(turns)}
    sizes = [count_tokens(t.text) for t in turns]
    tally = Tally()
    with tempfile.TemporaryDirectory() as folder:
        rt = Runtime(f"sqlite:///{folder}/bench.db", policy=policy)
        try:
            sid, _ = rt.execute("start_session", "bench", "openai:gpt-4o",
                                context_window=window, at=T0)  # fmt: skip
            clock = T0
            for n, turn in enumerate(turns, start=1):
                clock += timedelta(seconds=30)
                kind = "input" if turn.role == "user" else "output"
                rt.execute("append_node", str(sid), role=turn.role, at=clock,
                           **{kind: turn.text})  # fmt: skip
                if n < FIRST_CHECK or (n - FIRST_CHECK) % EVERY:
                    continue
                request = rt.rendered(str(sid), "openai")["request"]
                budget = rt.budget(str(sid))
                history = int(budget["history"])
                rendered = normalize("\n".join(strings(request.get("messages", []))))
                kept: list[int] = []
                spent = 0
                for index in range(n - 1, -1, -1):
                    if spent + sizes[index] > history:
                        break
                    spent += sizes[index]
                    kept.append(index)
                cut = normalize("\n".join(turns[i].text for i in sorted(kept)))
                whole = normalize("\n".join(t.text for t in turns[:n]))
                texts = {k: (v, set(v.split())) for k, v in
                         (("render", rendered), ("cut", cut), ("whole", whole))}  # fmt: skip
                used = int(budget["used"]["history"])
                if history and sum(sizes[:n]) > history:  # only once it cannot all fit
                    tally.used.append(used / history)
                for answer, evidence in qas:
                    if any(position.get(e, n) >= n for e in evidence):
                        continue
                    if not matches(answer, *texts["whole"]):
                        continue
                    tally.checks += 1
                    tally.truncation += matches(answer, *texts["cut"])
                    tally.ctxstore += matches(answer, *texts["render"])
        finally:
            rt.close()
    return tally


def row(label: str, t: Tally) -> str:
    lost_t, lost_c = t.checks - t.truncation, t.checks - t.ctxstore
    ratio = f"{lost_c / lost_t:.2f}" if lost_t else ("-" if not lost_c else "inf")
    used = f"{sum(t.used) / len(t.used):.1%}" if t.used else "-"  # it all fit
    share = lambda k: f"{k / t.checks:.1%}" if t.checks else "-"  # noqa: E731
    return (f"{label:<14} {t.checks:>6} {share(t.truncation):>11} {share(t.ctxstore):>9} "
            f"{ratio:>10} {used:>12}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one conversation only")
    parser.add_argument("--windows", default="8000,16000")
    parser.add_argument("--data", default=str(DATA), help="folder of LoCoMo conversation files")
    parser.add_argument("--policy", default="{}", help="JSON overrides of the default policy")
    args = parser.parse_args(argv)
    folder = Path(args.data)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        print(f"no LoCoMo conversations in {folder} (see its README): nothing to measure")
        return 0
    if args.quick:
        files = files[:1]
    from domain.policy import Policy

    policy = Policy.from_json(args.policy)
    print(f"policy {policy.rules_version}: summary_target {policy.summary_target}, "
          f"compact_at {policy.compact_at}, tail_turns {policy.tail_turns}")  # fmt: skip
    head = (f"{'window / conv':<14} {'checks':>6} {'truncation':>11} {'ctxstore':>9} "
            f"{'loss ratio':>10} {'history used':>12}")  # fmt: skip
    for window in (int(w) for w in args.windows.split(",")):
        print(f"\n{head}")
        total = Tally()
        for path in files:
            started = time.monotonic()
            tally = replay(path.stem, json.loads(path.read_text()), window, policy)
            total.add(tally)
            print(row(f"{window // 1000}k {path.stem}", tally),
                  f"  ({time.monotonic() - started:.0f}s)", flush=True)  # fmt: skip
        print(row(f"{window // 1000}k all", total), flush=True)
    print(
        "\n(kept: share of checks whose answer is in the render; loss ratio: ctxstore "
        "misses / truncation misses; history used: render's history tokens / limit)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
