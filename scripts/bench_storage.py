"""Where the bytes of ``bench_peers``' workload go, table by table (issue 29).

Storage is the one figure of ``scripts.bench_peers`` that does not depend on
the machine's load: this drives the same workload (its ``workload``, a turn
one ``POST /nodes/batch`` then one ``GET /render``) into a fresh store,
in-process, and prints each table's rows and bytes (indexes included):
SQLite's ``dbstat`` pages, PostgreSQL's ``pg_total_relation_size``.  With
``--base-tree`` it runs the same on another source tree (e.g. ``git archive
<commit> | tar -x -C DIR``) and prints the two side by side.

    python -m scripts.bench_storage [--store sqlite|pg] [--turns 300] [--base-tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("CTXSTORE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
_shared_tiktoken = ROOT.parent / "shared" / "tiktoken"
if not os.environ.get("TIKTOKEN_CACHE_DIR") and _shared_tiktoken.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shared_tiktoken)


def drive(url: str, sessions: int, turns: int) -> None:
    """The workload into the store at ``url``, through the API in this process."""
    from starlette.testclient import TestClient

    from api.app import create_app
    from scripts.coding_workload import ctx_nodes, workload
    from service.runtime import Runtime

    runtime = Runtime(url)
    try:
        with TestClient(create_app(runtime), base_url="http://localhost") as client:
            for s in range(sessions):
                reply = client.post("/sessions", json={"title": f"bench-{s}"})
                reply.raise_for_status()
                sid = reply.json()["session_id"]
                for turn in workload(s, turns):
                    path = f"/sessions/{sid}/nodes/batch"
                    client.post(path, json={"nodes": ctx_nodes(turn)}).raise_for_status()
                    client.get(f"/sessions/{sid}/render").raise_for_status()
    finally:
        runtime.close()


def sqlite_tables(path: Path) -> dict[str, list[int]]:
    """Each table's [rows, bytes], its indexes' pages counted with it."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN "
                                  "('table', 'index')").fetchall())  # fmt: skip
        out: dict[str, list[int]] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            out.setdefault(table, [0, 0])[1] += int(size)
        for table in out:
            if table in owner.values() and not table.startswith("sqlite_"):
                out[table][0] = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        total = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    out["(file)"] = [0, total]
    return out


def pg_tables(url: str) -> dict[str, list[int]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # not a full vacuum: as a live store would stand
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN "
            "pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND "
            "n.nspname = 'public'").fetchall()  # fmt: skip
        out: dict[str, list[int]] = {}
        for name, size in rows:
            count = conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()
            out[name] = [int(count[0]) if count else 0, int(size)]
        db = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    out["(database)"] = [0, int(db[0]) if db else 0]
    return out


def measure(store: str, sessions: int, turns: int) -> dict[str, list[int]]:
    if store == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="bench_storage_"))
        try:
            drive(f"sqlite:///{folder / 'ctx.db'}", sessions, turns)
            return sqlite_tables(folder / "ctx.db")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    import psycopg

    name = f"bench_storage_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        drive(url, sessions, turns)
        empty = pg_empty()
        found = pg_tables(url)
        found["(database)"][1] -= empty  # what an empty database holds is not the store's
        return found
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_empty() -> int:
    import psycopg

    name = f"bench_storage_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        try:
            row = conn.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
            return int(row[0]) if row else 0
        finally:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def in_tree(tree: str, args: argparse.Namespace) -> dict[str, list[int]]:
    """``measure`` run by ``tree``'s own modules (this file, run from there)."""
    code = ("import runpy, sys; sys.path.insert(0, '.'); sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")  # fmt: skip
    cmd = [sys.executable, "-c", code, __file__, "--json", "--store", args.store,
           "--sessions", str(args.sessions), "--turns", str(args.turns)]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True, text=True)
    found: dict[str, list[int]] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def table(columns: dict[str, dict[str, list[int]]], turns: int) -> str:
    names = sorted({t for found in columns.values() for t in found},
                   key=lambda t: (t.startswith("("), t))  # fmt: skip
    head = ["table", *(f"{c} rows | {c} bytes" for c in columns)]
    out = ["| " + " | ".join(head) + " |", "|---|" + "---|---|" * len(columns)]
    for name in names:
        cells = []
        for found in columns.values():
            rows, size = found.get(name, [0, 0])
            cells += [str(rows), f"{size:,}"]
        out.append("| " + " | ".join([name, *cells]) + " |")
    per = [f"{found.get('(file)', found.get('(database)', [0, 0]))[1] / turns:,.0f}"
           for found in columns.values()]  # fmt: skip
    out.append("| bytes per turn | " + " | ".join(f"| {p}" for p in per) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--turns", type=int, default=300, help="turns a session")
    parser.add_argument("--base-tree", help="also measure this source tree, side by side")
    parser.add_argument("--json", action="store_true", help="print the tables as JSON")
    args = parser.parse_args(argv)
    found = measure(args.store, args.sessions, args.turns)
    if args.json:
        print(json.dumps(found))
        return
    columns: dict[str, Any] = {}
    if args.base_tree:
        columns["base"] = in_tree(args.base_tree, args)
    columns["this"] = found
    print(f"# bench_storage: {args.sessions} x {args.turns} turns, store {args.store}")
    print(table(columns, args.sessions * args.turns))


if __name__ == "__main__":
    main()
