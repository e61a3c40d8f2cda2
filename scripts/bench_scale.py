"""Memory and first-query time of a fresh process, as the store grows.

Builds (once, then reuses) SQLite stores of 1x, 4x and 16x sessions of
realistic 1,000-node coding-agent sessions (tool results of a few KB, about
9 MB of events each), then for each store starts a fresh Python process that
opens the store, renders one session's request and reports its peak RSS and
how long that first query took.  A process should need memory for the
sessions it touches, not for the whole store.

    python scripts/bench_scale.py [--base 4] [--nodes 1000] [--folder /tmp/ctxstore-scale]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_shared_tiktoken = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared_tiktoken.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared_tiktoken)

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
RSS_RATIO_TARGET = 1.2
FIRST_QUERY_TARGET = 0.3


def session_lines(rng: random.Random, nodes: int, tag: str) -> list[dict[str, Any]]:
    """A coding-agent session as transcript lines: user, assistant, tool, ..."""
    words = ("def", "return", "self", "value", "assert", "import", "class", "None", "for")
    clock = T0
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "title": f"scale {tag}",
            "model": "openai:gpt-4o",
            "at": clock.isoformat(),
        }
    ]
    for n in range(nodes):
        clock += timedelta(seconds=20)
        kind = n % 4
        if kind == 0:
            lines.append(
                {
                    "type": "node",
                    "role": "user",
                    "at": clock.isoformat(),
                    "input": f"{tag} step {n}: " + " ".join(rng.choices(words, k=40)),
                }
            )
        elif kind in (1, 3):
            lines.append(
                {
                    "type": "node",
                    "role": "assistant",
                    "at": clock.isoformat(),
                    "output": f"{tag} {n}: " + " ".join(rng.choices(words, k=60)),
                }
            )
        else:
            body = "\n".join(
                " ".join(rng.choices(words, k=12)) for _ in range(rng.randint(40, 200))
            )
            lines.append(
                {
                    "type": "node",
                    "role": "tool",
                    "name": "read_file",
                    "input": {"path": f"{tag}/f{n}.py"},
                    "output": body,
                    "at": clock.isoformat(),
                }
            )
    return lines


def build(path: Path, sessions: int, nodes: int) -> None:
    """A store of ``sessions`` sessions (made once; a finished store is reused)."""
    done = path.with_suffix(".done")
    if done.exists():
        return
    from scripts.transcript import import_file

    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    rng = random.Random(sessions)
    started = time.perf_counter()
    for n in range(sessions):
        lines = session_lines(rng, nodes, f"s{n}")
        transcript = path.with_suffix(".jsonl")
        transcript.write_text("\n".join(json.dumps(line) for line in lines))
        import_file(f"sqlite:///{path}", transcript)
        transcript.unlink()
        print(
            f"  built {path.name}: {n + 1}/{sessions} sessions "
            f"({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    done.write_text("ok")


# The session to render is read straight from the file, so that nothing the
# runtime loads for a listing is counted: the figure is what serving one
# session costs a fresh process.
PROBE = """
import json, resource, sqlite3, sys, time
path = sys.argv[1].removeprefix("sqlite:///")
with sqlite3.connect(path) as db:
    ids = [r[0] for r in db.execute("SELECT session_id FROM ctx_sessions ORDER BY session_id")]
sid = ids[len(ids) // 2]
started = time.perf_counter()
from service.runtime import Runtime
rt = Runtime(sys.argv[1], migrate=False, working_set=int(sys.argv[2]))
opened = time.perf_counter()
rt.rendered(sid, "openai")
done = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"rss": rss, "first_query": done - opened, "start": opened - started}))
"""


def probe(path: Path, working_set: int) -> dict[str, float]:
    """A fresh process: ``working_set`` 0 holds the whole store (the baseline)."""
    from domain.store_config import WORKING_SET

    budget = str(working_set if working_set >= 0 else WORKING_SET)
    out = subprocess.run([sys.executable, "-c", PROBE, f"sqlite:///{path}", budget], cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=int, default=4, help="sessions in the 1x store")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--folder", default="/tmp/ctxstore-scale")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for scale in (1, 4, 16):
        sessions = args.base * scale
        path = folder / f"scale-{sessions}x{args.nodes}.db"
        build(path, sessions, args.nodes)
        size = sum(p.stat().st_size for p in folder.glob(path.name + "*"))
        for mode, budget in (("whole store", 0), ("working set", -1)):
            rows.append((mode, scale, sessions, size, probe(path, budget)))
    print(f"\n{'process holds':<13} {'store':<6} {'sessions':>8} {'size':>9} {'RSS':>9} "
          f"{'RSS / 1x':>9} {'first query':>12} {'start-up':>9}")  # fmt: skip
    for mode in ("whole store", "working set"):
        mine = [row for row in rows if row[0] == mode]
        base_rss = mine[0][4]["rss"]
        for _, scale, sessions, size, r in mine:
            print(f"{mode:<13} {str(scale) + 'x':<6} {sessions:>8} {size / 2**20:>7.0f} MB "
                  f"{r['rss'] / 2**20:>6.0f} MB {r['rss'] / base_rss:>8.2f}x "
                  f"{r['first_query']:>11.2f}s {r['start']:>8.2f}s")  # fmt: skip
        last = mine[-1][4]
        print(f"  {mode}: RSS at 16x {last['rss'] / base_rss:.2f}x RSS at 1x (target <= "
              f"{RSS_RATIO_TARGET}x); first query at 16x {last['first_query']:.2f} s "
              f"(target < {FIRST_QUERY_TARGET} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
