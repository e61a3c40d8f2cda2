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
answer token does.  Where the runtime has ``recall``, a miss is asked again
of the top-5 recall for the question's own text ("render or recall").

Then, per window, a seeded coding-agent run of about 350 tool calls with 20
planted facts (``scripts/retention_coding.py``, ``scripts/planted_facts.py``),
checked at its end the same three ways (planted answers verbatim), and once
``scripts/bench_cache.py``'s median prefix reuse at 128k and 16k, by its own
functions (``--cache-calls 0`` skips it).

Printed per window: checks, kept by truncation, by ctxstore and by ctxstore
or its recall, the loss ratios (ctxstore misses / truncation misses: under
1.0 ctxstore loses fewer answers) and the share of the history limit each
used, on average over the checkpoints where the run so far no longer fits it.
The whole run takes about three minutes on two cores; ``--quick`` (one
conversation, a 60-turn coding run, 40 cache calls) about twenty seconds.

    python scripts/bench_retention.py [--quick] [--windows 8000,16000,32000] [--policy JSON]
                                      [--coding-turns 170] [--cache-calls 300]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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

from scripts.locomo import matches, questions, turns_of  # noqa: E402
from scripts.planted_facts import normalize  # noqa: E402

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
FIRST_CHECK, EVERY = 100, 50


@dataclass
class Tally:
    checks: int = 0
    truncation: int = 0
    ctxstore: int = 0
    recall: int | None = None  # in the render or in the top-5 recall; None: no recall
    used: list[float] = field(default_factory=list)  # ctxstore's render
    cut_used: list[float] = field(default_factory=list)  # truncation's
    counts: bool = False  # print kept checks as "n/N", not as shares

    def add(self, other: Tally) -> None:
        self.checks += other.checks
        self.truncation += other.truncation
        self.ctxstore += other.ctxstore
        if other.recall is not None:
            self.recall = (self.recall or 0) + other.recall
        self.used.extend(other.used)
        self.cut_used.extend(other.cut_used)


def recalled(rt: Any, sid: str, question: str) -> list[str] | None:
    """The texts of the top-5 recall hits for ``question``; None where the runtime has none."""
    if not hasattr(rt, "recall"):
        return None
    hits = rt.recall(sid, question, limit=5, hidden=True)["hits"]
    # what the recall tool shows the model: each hit and the start of the node after it
    return [f"{hit.get('text', '')}\n{hit.get('next_text', '')}" for hit in hits]


def replay(name: str, conv: dict[str, Any], window: int, policy: Any) -> Tally:
    from domain.tokens import count_tokens
    from scripts.retention_coding import bench_session, fed, truncate

    turns = turns_of(conv)
    qas = questions(conv)
    position = {t.dia_id: i for i, t in enumerate(turns)}
    sizes = [count_tokens(t.text) for t in turns]
    tally = Tally()
    with bench_session(window, policy) as (rt, sid):
        clock = T0
        for n, turn in enumerate(turns, start=1):
            clock += timedelta(seconds=30)
            kind = "input" if turn.role == "user" else "output"
            rt.execute("append_node", sid, role=turn.role, at=clock,
                       **{kind: turn.text})  # fmt: skip
            if n < FIRST_CHECK or (n - FIRST_CHECK) % EVERY:
                continue
            rendered, history, used = fed(rt, sid)
            rendered = normalize(rendered)
            kept, spent = truncate(sizes, n, history)
            cut = normalize("\n".join(turns[i].text for i in kept))
            whole = normalize("\n".join(t.text for t in turns[:n]))
            texts = {k: (v, set(v.split())) for k, v in
                     (("render", rendered), ("cut", cut), ("whole", whole))}  # fmt: skip
            if history and sum(sizes[:n]) > history:  # only once it cannot all fit
                tally.used.append(used / history)
                tally.cut_used.append(spent / history)
            for qa in qas:
                if any(position.get(e, n) >= n for e in qa.evidence):
                    continue
                if not matches(qa.answer, *texts["whole"]):
                    continue
                tally.checks += 1
                tally.truncation += matches(qa.answer, *texts["cut"])
                in_render = matches(qa.answer, *texts["render"])
                tally.ctxstore += in_render
                if hasattr(rt, "recall"):  # asked only where the render misses it
                    hits = [] if in_render else recalled(rt, sid, qa.text) or []
                    got = normalize("\n".join(hits))
                    hit = in_render or matches(qa.answer, got, set(got.split()))
                    tally.recall = (tally.recall or 0) + hit
    return tally


def coding(window: int, policy: Any, turns: int) -> tuple[Tally, dict[str, list[str]]]:
    """The planted coding run at ``window`` as a row, and the answers each method missed."""
    from scripts.retention_coding import run_coding

    r = run_coding(window, policy, turns, recalled)
    tally = Tally(len(r.planted), len(r.truncation), len(r.render),
                  None if r.recall is None else len(r.recall), counts=True)  # fmt: skip
    tally.used.extend([] if r.used is None else [r.used])
    tally.cut_used.extend([] if r.cut_used is None else [r.cut_used])
    missed = {}
    for where, kept in (("truncation", r.truncation), ("ctxstore", r.render),
                        ("ctxstore+recall", r.recall)):  # fmt: skip
        if kept is not None:
            missed[where] = [f.answer for f in r.planted if f not in kept]
    return tally, missed


def row(label: str, t: Tally) -> str:
    def share(kept: int | None) -> str:
        if kept is None:
            return "n/a"
        if t.counts:
            return f"{kept}/{t.checks}"
        return f"{kept / t.checks:.1%}" if t.checks else "-"

    def ratio(kept: int | None) -> str:
        if kept is None:
            return "n/a"
        lost_t, lost_c = t.checks - t.truncation, t.checks - kept
        return f"{lost_c / lost_t:.2f}" if lost_t else ("-" if not lost_c else "inf")

    def mean(values: list[float]) -> str:
        return f"{sum(values) / len(values):.1%}" if values else "-"  # "-": it all fit

    return (f"{label:<18} {t.checks:>6} {share(t.truncation):>10} {share(t.ctxstore):>9} "
            f"{share(t.recall):>9} {ratio(t.ctxstore):>10} {ratio(t.recall):>9} "
            f"{mean(t.cut_used):>9} {mean(t.used):>9}")  # fmt: skip


HEAD = (f"{'window / run':<18} {'checks':>6} {'truncation':>10} {'ctxstore':>9} {'+recall':>9} "
        f"{'loss ratio':>10} {'+recall':>9} {'cut used':>9} {'ctx used':>9}")  # fmt: skip
LEGEND = """
truncation, ctxstore: share of checks whose answer is in what the model is fed (truncation:
the latest turns up to the same history limit); +recall: in ctxstore's render or in the top-5
recall for the question's own text (n/a: this runtime has no recall); loss ratio: ctxstore
misses / truncation misses (under 1.0 ctxstore loses fewer); cut used, ctx used: history
tokens / history limit, on average where the run no longer fits it. coding: the planted
facts of the coding-agent run, checked at its end."""


def cache_reuse(windows: tuple[int, ...], calls: int, policy: Any) -> dict[int, str]:
    """``bench_cache``'s median prefix reuse (Anthropic shape, ``policy``) per window."""
    from scripts import bench_cache

    out = {}
    for window in windows:
        (result,) = bench_cache.run(f"{window // 1000}k", window, policy, calls, seed=7,
                                    quiet=True, shapes=("anthropic",))  # fmt: skip
        out[window] = str(result.summary()["median reuse"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one conversation, a short coding run, 40 cache calls")  # fmt: skip
    parser.add_argument("--windows", default="8000,16000,32000")
    parser.add_argument("--data", default=str(DATA), help="folder of LoCoMo conversation files")
    parser.add_argument("--policy", default="{}", help="JSON overrides of the default policy")
    parser.add_argument("--coding-turns", type=int, default=170,
                        help="turns of the coding-agent run (0: none)")  # fmt: skip
    parser.add_argument("--cache-calls", type=int, default=300,
                        help="model calls of bench_cache's run (0: skip its figures)")  # fmt: skip
    args = parser.parse_args(argv)
    folder = Path(args.data)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        print(f"no LoCoMo conversations in {folder} (see its README): nothing to measure")
        return 0
    if args.quick:
        files = files[:1]
        args.coding_turns = min(args.coding_turns, 60)

        args.cache_calls = min(args.cache_calls, 40)
    from domain.policy import Policy
    from service.runtime import Runtime

    policy = Policy.from_json(args.policy)
    recall = "on" if hasattr(Runtime, "recall") else "n/a (no Runtime.recall)"
    print(f"policy {policy.rules_version}: summary_target {policy.summary_target}, "
          f"compact_at {policy.compact_at}, tail_turns {policy.tail_turns}; "
          f"recall {recall}")  # fmt: skip
    began = time.monotonic()
    for window in (int(w) for w in args.windows.split(",")):
        print(f"\n{HEAD}")
        total = Tally()
        for path in files:
            started = time.monotonic()
            tally = replay(path.stem, json.loads(path.read_text()), window, policy)
            total.add(tally)
            print(row(f"{window // 1000}k {path.stem}", tally),
                  f"  ({time.monotonic() - started:.0f}s)", flush=True)  # fmt: skip
        print(row(f"{window // 1000}k LoCoMo all", total), flush=True)
        if args.coding_turns:
            started = time.monotonic()
            tally, missed = coding(window, policy, args.coding_turns)
            print(row(f"{window // 1000}k coding", tally),
                  f"  ({time.monotonic() - started:.0f}s)", flush=True)  # fmt: skip
            for where, answers in missed.items():
                if answers:
                    print(f"{'':<18} missed by {where}: {', '.join(answers)}")
    if args.cache_calls:
        reuse = cache_reuse((128_000, 16_000), args.cache_calls, policy)
        print(f"\nprefix reuse (scripts/bench_cache.py, {args.cache_calls} calls, median): "
              + ", ".join(f"{w // 1000}k {r}" for w, r in reuse.items()))  # fmt: skip
    print(LEGEND)
    print(f"({time.monotonic() - began:.0f}s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
