"""The ``ctxstore`` command line, run in-process through ``scripts.cli.main``.

These go through the real stores (never mocks): a transcript imported by the
CLI must export byte-identically every time, replay to any position, and a
bad line must be refused by number without leaving half a session behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from domain.application import CtxStore
from scripts import cli, demo, transcript

SAMPLE = Path(cli.__file__).resolve().parent / "sample_session.jsonl"

SMALL = [
    {"type": "session", "title": "small", "model": "openai:gpt-4o", "at": "2026-01-01T10:00:00Z"},
    {"type": "node", "id": "u1", "role": "user", "input": "Fix it."},
    {"type": "node", "id": "a1", "role": "assistant", "output": "Reading.", "predecessor": "u1",
     "at": "2026-01-01T10:01:00Z"},
    {"type": "node", "id": "t1", "role": "tool", "name": "read_file", "input": {"path": "x.py"},
     "output": "print(1)", "caller": "a1", "at": "2026-01-01T10:01:05"},
    {"type": "pin", "node": "u1"},
    {"type": "usage", "request_id": "r1", "input_tokens": 120, "output_tokens": 9},
    {"type": "node", "id": "a2", "role": "assistant", "output": "Done.", "predecessor": "a1"},
    {"type": "retry", "of": "a2", "id": "a2b", "output": "Done."},
    {"type": "checkout", "node": "a2"},
    {"type": "model", "model": "anthropic:claude-sonnet-4"},
]  # fmt: skip


def write(path: Path, records: list[object], raw: dict[int, str] | None = None) -> Path:
    """A transcript file; ``raw`` replaces the given (1-based) lines verbatim."""
    lines = [json.dumps(r) for r in records]
    for number, text in (raw or {}).items():
        lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/x.db"


def imported(capsys: pytest.CaptureFixture[str], db: str, path: Path) -> str:
    status, out, err = run(capsys, "import", str(path), "--db", db)
    assert status == 0, err
    return out.strip()


def test_import_then_export_is_byte_identical(
    capsys: pytest.CaptureFixture[str], store_url: str, tmp_path: Path
) -> None:
    sid = imported(capsys, store_url, SAMPLE)
    first = run(capsys, "export", sid, "--db", store_url)
    again = run(capsys, "export", sid, "--db", store_url)
    assert first[0] == again[0] == 0
    assert first[1] == again[1]
    out = tmp_path / "export.jsonl"
    assert run(capsys, "export", sid, "--db", store_url, "--out", str(out))[0] == 0
    assert out.read_bytes() == first[1].encode()

    lines = first[1].splitlines()
    records = [json.loads(line) for line in lines]
    assert [line for line in lines] == [json.dumps(r, sort_keys=True, separators=(",", ":"))
                                        for r in records]  # fmt: skip
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert all(set(r) == {"seq", "type", "timestamp", "data"} for r in records)
    started = records[0]
    assert started["type"] == "SessionStarted"
    assert started["timestamp"] == "2026-03-02T09:00:00+00:00"
    assert started["data"]["model"] == "openai:gpt-4o"
    source = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    node_ids = [r["data"]["node_id"] for r in records if r["type"] == "NodeAppended"]
    expected = [r["id"] for r in source if r["type"] == "node"]
    assert [n for n in node_ids if n in expected] == expected  # ids verbatim, in order
    kinds = {r["type"] for r in records}
    assert {"NodeAppended", "NodePinned", "UsageMeasured", "HeadMoved", "AgentRunStarted",
            "AgentRunFinished", "ModelSwitched"} <= kinds  # fmt: skip
    retry = next(r for r in records if r["data"].get("sibling_of"))
    assert retry["data"]["version_kind"] == "retry"


def test_import_catches_the_projections_up(capsys: pytest.CaptureFixture[str], db: str,
                                           tmp_path: Path) -> None:  # fmt: skip
    from projections.store import ProjectionStore

    imported(capsys, db, write(tmp_path / "t.jsonl", SMALL))
    app, store = CtxStore(url=db), ProjectionStore(db)
    try:
        assert store.position() == app.recorder.max_notification_id()
    finally:
        store.close()
        app.close()


def test_replay_to_a_position(capsys: pytest.CaptureFixture[str], db: str,
                              tmp_path: Path) -> None:  # fmt: skip
    sid = imported(capsys, db, write(tmp_path / "t.jsonl", SMALL))
    status, out, _ = run(capsys, "replay", sid, "--to", "4", "--db", db)
    assert status == 0
    state = json.loads(out)
    assert state["version"] == 4 and state["head"] == "t1" and state["node_count"] == 3
    assert [(n["node_id"], n["role"], n["parent"]) for n in state["nodes"]] == [
        ("u1", "user", None),
        ("a1", "assistant", "u1"),
        ("t1", "tool", "a1"),
    ]
    assert state["pinned"] == [] and state["running"] is None
    assert state["model"] == "openai:gpt-4o"

    state = json.loads(run(capsys, "replay", sid, "--to", "10", "--db", db)[1])
    assert state["head"] == "a2" and state["pinned"] == ["u1"] and state["node_count"] == 5
    assert state["model"] == "anthropic:claude-sonnet-4"

    status, _, err = run(capsys, "replay", sid, "--to", "11", "--db", db)
    assert status == 2 and "error: invalid_command: --to must be within 1..10" in err


def test_times_parse_to_aware_datetimes_and_carry_forward(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    sid = imported(capsys, db, write(tmp_path / "t.jsonl", SMALL))
    records = [json.loads(x) for x in run(capsys, "export", sid, "--db", db)[1].splitlines()]
    times = {r["data"]["node_id"]: r["timestamp"] for r in records if r["type"] == "NodeAppended"}
    assert times["u1"] == "2026-01-01T10:00:00+00:00"  # no "at": the previous line's time
    assert times["t1"] == "2026-01-01T10:01:05+00:00"  # no zone: UTC
    assert times["a2b"] == "2026-01-01T10:01:05+00:00"


@pytest.mark.parametrize(
    ("line", "text", "expected"),
    [
        (3, "{not json", "bad_transcript: line 3: not valid JSON"),
        (2, '{"type": "nod", "role": "user"}', "bad_transcript: line 2: unknown type 'nod'"),
        (3, '{"type": "node", "role": "user", "predecesor": "u1"}',
         "bad_transcript: line 3: unknown key(s) for 'node': predecesor"),
        (6, '{"type": "usage", "request_id": "r1", "input_tokens": "many"}',
         "bad_transcript: line 6: 'input_tokens' must be an integer"),
        (4, '{"type": "node", "id": "t1", "role": "tool", "caller": "nobody"}',
         "node_not_found: line 4: unknown node 'nobody'"),
        (5, '{"type": "pin", "node": "u1", "at": "2025-12-31T00:00:00Z"}',
         "bad_transcript: line 5: 'at' goes back in time (before line 4)"),
        (1, '{"type": "node", "role": "user"}',
         "bad_transcript: line 1: the first line must be the 'session' line"),
        (7, '{"type": "session", "model": "a:b"}', "bad_transcript: line 7: a second 'session'"),
    ],
)  # fmt: skip
def test_a_bad_line_is_refused_by_number_and_stores_nothing(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path, line: int, text: str,
    expected: str,
) -> None:  # fmt: skip
    path = write(tmp_path / "bad.jsonl", SMALL, {line: text})
    status, out, err = run(capsys, "import", str(path), "--db", db)
    assert status == 2 and out == ""
    assert err.startswith("error: ") and expected in err, err
    assert "Traceback" not in err
    app = CtxStore(url=db)
    try:
        assert not app.recorder.max_notification_id()  # the rehearsal refused it first
    finally:
        app.close()


def test_unknown_session_or_file_exits_2(capsys: pytest.CaptureFixture[str], db: str,
                                         tmp_path: Path) -> None:  # fmt: skip
    assert run(capsys, "migrate", "--db", db)[0] == 0
    for argv in (["export", "00000000-0000-0000-0000-000000000000"], ["export", "nope"],
                 ["replay", "00000000-0000-0000-0000-000000000000", "--to", "1"]):  # fmt: skip
        status, out, err = run(capsys, *argv, "--db", db)
        assert status == 2 and out == "" and err.startswith("error: session_not_found: ")
    status, _, err = run(capsys, "import", str(tmp_path / "missing.jsonl"), "--db", db)
    assert status == 2 and "error: bad_file: " in err and "missing.jsonl" in err
    status, _, err = run(capsys, "export", "x", "--db", "mysql://nowhere/db")
    assert status == 2 and "error: bad_database_url: " in err
    assert run(capsys, "replay", "x", "--db", db)[0] == 2  # --to is required


def test_demo_imports_the_sample_once(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    sid, fresh = demo.demo_session(db)
    again, fresh_again = demo.demo_session(db)
    assert (again, fresh, fresh_again) == (sid, True, False)
    status, out, _ = run(capsys, "replay", sid, "--to", "1", "--db", db)
    assert status == 0 and json.loads(out)["title"].startswith("durations")


def test_rebuild_reports_identical_digests(capsys: pytest.CaptureFixture[str], db: str,
                                           tmp_path: Path) -> None:  # fmt: skip
    imported(capsys, db, write(tmp_path / "t.jsonl", SMALL))
    status, out, _ = run(capsys, "rebuild", "--db", db)
    result = json.loads(out)
    assert status == 0 and result["identical"] is True and result["events"] > 0


def test_scripts_rebuild_runs_the_same_command(capsys: pytest.CaptureFixture[str], db: str,
                                              tmp_path: Path) -> None:  # fmt: skip
    """``scripts/rebuild`` is the entry point the projection issue names."""
    imported(capsys, db, write(tmp_path / "t.jsonl", SMALL))
    script = Path(cli.__file__).resolve().parent / "rebuild"
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep
               + os.environ.get("PATH", ""))  # fmt: skip
    # run from the database's folder with a relative URL: it must mean the same file
    done = subprocess.run([str(script), "--db", "sqlite:///x.db"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["identical"] is True and result["events"] > 0
    missing = subprocess.run([str(script), "--db", "nope://x"], capture_output=True, text=True,
                             env=env, timeout=120, check=False)  # fmt: skip
    assert missing.returncode != 0 and "error:" in missing.stderr


def test_transcript_without_any_time_uses_one_import_clock() -> None:
    steps = transcript.parse([json.dumps(r) for r in SMALL[:2]] + [""])
    assert len(steps) == 2 and steps[0].at == steps[1].at
    untimed = [{k: v for k, v in r.items() if k != "at"} for r in SMALL[:3]]
    steps = transcript.parse(json.dumps(r) for r in untimed)
    assert len({s.at for s in steps}) == 1 and steps[0].at.tzinfo is not None


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_a_bad_policy_stops_start_up_by_name(capsys: pytest.CaptureFixture[str], db: str,
                                             monkeypatch: pytest.MonkeyPatch,
                                             command: str) -> None:  # fmt: skip
    """Refused before any server starts, rather than failing inside the projection."""
    import uvicorn

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the server started under a bad policy")

    monkeypatch.setattr(uvicorn, "run", started)
    monkeypatch.setenv("CTXSTORE_POLICY", '{"summary_max_tokens": "abc"}')
    status, out, err = run(capsys, command, "--db", db)
    assert status == 2
    assert err.startswith("error: invalid_policy: policy summary_max_tokens must be")


def test_worker_waits_out_a_busy_database_instead_of_exiting(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal

    from sqlalchemy.exc import OperationalError

    from projections.runtime import Runtime

    calls: list[int] = []

    def flaky(self: Runtime) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))
        os.kill(os.getpid(), signal.SIGTERM)  # the worker's own stop signal
        return 0

    monkeypatch.setattr(Runtime, "catch_up", flaky)
    monkeypatch.setattr(cli.time, "sleep", lambda seconds: None)
    status, _, err = run(capsys, "worker", "--db", db, "--interval", "0.01")
    assert status == 0 and len(calls) == 2
    assert "database is locked" in err and "retrying" in err


def test_an_id_another_session_holds_refuses_the_whole_import(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    """The rehearsal store is empty; the real store's ids are checked before any event."""
    imported(capsys, db, write(tmp_path / "first.jsonl", SMALL))
    app = CtxStore(url=db)
    try:
        stored = len(app.recorder.select_notifications(start=1, limit=10_000))
    finally:
        app.close()
    clash = [SMALL[0], {"type": "node", "id": "mine1", "role": "user", "input": "a"},
             {"type": "node", "id": "a1", "role": "user", "input": "b"}]  # fmt: skip
    status, _, err = run(capsys, "import", str(write(tmp_path / "second.jsonl", clash)),
                         "--db", db)  # fmt: skip
    assert status == 2 and "duplicate_node" in err and "line 3" in err
    app = CtxStore(url=db)
    try:
        assert len(app.recorder.select_notifications(start=1, limit=10_000)) == stored
    finally:
        app.close()
