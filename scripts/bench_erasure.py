"""What one erasure costs in a store of N sessions: full rebuild (before) vs re-projection (now).

    python -m scripts.bench_erasure [--sessions 400] [--turns 3] [--dir DIR]

Builds one SQLite store of ``--sessions`` sessions of ``--turns`` user and
assistant turns each, every tenth of which attaches the session before it
(so erasing one has a referrer to tombstone), copies the file, and erases
the same session in each copy: once as ``main`` did before this change
(delete, then truncate every projection and project the whole log again),
once as now (drop and re-project only the erased session and the sessions
that showed its content).  Both answers must leave a store whose rebuild
equals its live tables.  Prints the times side by side, with the
compaction (``VACUUM``, the same in both, and proportional to the file)
apart from the rest.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from projections.rebuild import rebuild_and_compare
from service.erasure import Eraser
from service.erasure_store import EventTables
from service.runtime import Runtime


class FullRebuildEraser(Eraser):
    """The erasure as it was: the same delete, then every projection from scratch."""

    def _write(self, plan: Any, records: list[dict[str, Any]], when: datetime) -> None:
        plan.reprojected = []  # drop the erased sessions' rows only, re-project nothing
        super()._write(plan, records, when)
        self.runtime.store.truncate()
        self.runtime.processor.projector = None
        self.runtime.catch_up()


def build(url: str, sessions: int, turns: int) -> list[str]:
    rt = Runtime(url, auto_compact=False)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    ids: list[str] = []
    try:
        for n in range(sessions):
            sid, _ = rt.execute("start_session", f"session {n}", at=at)
            ids.append(str(sid))
            for turn in range(turns):
                at += timedelta(seconds=1)
                rt.execute("append_node", sid, role="user", input=f"question {n}.{turn}", at=at)
                rt.execute("append_node", sid, role="assistant",
                           output=f"answer {n}.{turn} " * 20, at=at)  # fmt: skip
            if n % 10 == 9:
                rt.execute("attach", sid, ids[n - 1], at=at)
    finally:
        rt.close()
    return ids


def erase(url: str, session_id: str, eraser: type[Eraser]) -> dict[str, float]:
    rt = Runtime(url, auto_compact=False)
    spent = {"compact": 0.0}
    compact = EventTables.compact

    def timed(self: EventTables) -> bool:
        started = time.perf_counter()
        try:
            return compact(self)
        finally:
            spent["compact"] = time.perf_counter() - started

    EventTables.compact = timed  # type: ignore[method-assign]
    try:
        rt.catch_up()
        started = time.perf_counter()
        result = eraser(rt).erase(session_id, "bench")
        spent["total"] = time.perf_counter() - started
        spent["reprojected"] = result["reprojected"]
    finally:
        EventTables.compact = compact  # type: ignore[method-assign]
        rt.close()
    assert rebuild_and_compare(url)["identical"], "rebuild differs from the live tables"
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (a temp dir)")
    args = parser.parse_args(argv)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="bench_erasure_"))
    base = folder / "base.db"
    started = time.perf_counter()
    ids = build(f"sqlite:///{base}", args.sessions, args.turns)
    took, size = time.perf_counter() - started, base.stat().st_size / 1e6
    print(f"built {args.sessions} sessions x {args.turns} turns in {took:.1f} s ({size:.1f} MB)")
    victim = ids[len(ids) // 2 - 2]  # attached by the next tenth session: one referrer
    rows = []
    for name, eraser in (
        ("before (full rebuild)", FullRebuildEraser),
        ("after (re-project)", Eraser),
    ):
        path = folder / f"{name.split()[0]}.db"
        shutil.copy(base, path)
        spent = erase(f"sqlite:///{path}", victim, eraser)
        rows.append((name, spent))
    print(f"{'erase one session':<24}{'total s':>10}{'without VACUUM':>16}{'VACUUM s':>10}"
          f"{'re-projected':>14}")  # fmt: skip
    for name, s in rows:
        sessions = "all" if name.startswith("before") else str(int(s["reprojected"]))
        print(f"{name:<24}{s['total']:>10.3f}{s['total'] - s['compact']:>16.3f}"
              f"{s['compact']:>10.3f}{sessions:>14}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
