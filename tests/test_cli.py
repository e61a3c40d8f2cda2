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
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from domain.application import CtxStore
from scripts import cli, demo, transcript
from tests.conftest import STORES, pg_admin_url

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
        assert not app.recorder.max_notification_id()  # one write, never made
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


def test_demo_prints_the_inspector_url(db: str, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import uvicorn

    served: list[dict[str, object]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: served.append(kw))
    status, out, _ = run(capsys, "demo", "--db", db, "--port", "8123")
    sid = demo.demo_session(db)[0]
    assert status == 0 and served and served[0]["port"] == 8123
    assert f"\n  http://127.0.0.1:8123/ui#session={sid}\n" in out


def test_rebuild_reports_identical_digests(capsys: pytest.CaptureFixture[str], db: str,
                                           tmp_path: Path) -> None:  # fmt: skip
    imported(capsys, db, write(tmp_path / "t.jsonl", SMALL))
    status, out, _ = run(capsys, "rebuild", "--db", db)
    result = json.loads(out)
    assert status == 0 and result["identical"] is True and result["events"] > 0


def test_an_online_rebuild_checks_then_switches(capsys: pytest.CaptureFixture[str], db: str,
                                                tmp_path: Path) -> None:  # fmt: skip
    imported(capsys, db, write(tmp_path / "t.jsonl", SMALL))
    status, out, _ = run(capsys, "rebuild", "--online", "--db", db)
    result = json.loads(out)
    assert status == 0 and result["identical"] is True and result["switched"] is True
    assert result["events"] > 0 and result["switched_at"] >= result["checked_at"] > 0


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


def test_serve_bounds_uvicorn_and_names_its_host(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle and excess connections are uvicorn's to bound; the bound host is one the app
    answers (its Host check), and a bad limit stops start-up by name."""
    import uvicorn
    from starlette.testclient import TestClient

    calls: list[dict[str, object]] = []
    apps: list[Callable[[], Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: (apps.append(app),
                                                                calls.append(kwargs)))  # fmt: skip
    monkeypatch.setenv("CTXSTORE_BIND_HOST", "")
    before = dict(os.environ)
    assert run(capsys, "serve", "--db", db, "--host", "box.lan")[0] == 0
    assert calls[0]["timeout_keep_alive"] == 5 and calls[0]["limit_concurrency"] == 1000
    assert dict(os.environ) == before  # handed to the app, not written (issue 15)
    assert calls[0]["factory"] is True
    with TestClient(apps[0](), base_url="http://box.lan") as served:
        assert served.get("/health").status_code == 200
    monkeypatch.setenv("CTXSTORE_MAX_BODY_BYTES", "lots")
    status, _, err = run(capsys, "serve", "--db", db)
    assert status == 2 and err.startswith("error: invalid_setting: CTXSTORE_MAX_BODY_BYTES=")
    assert len(calls) == 1


def test_serve_with_workers_becomes_uvicorn_with_its_settings_in_the_workers_environment(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn's workers import the app by name and read the environment: this process
    is replaced by one whose environment names the database and host; its own is left."""
    execs: list[tuple[str, list[str], dict[str, str]]] = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: execs.append((path, argv, env)))
    before = dict(os.environ)
    assert run(capsys, "serve", "--db", db, "--host", "box.lan", "--workers", "3")[0] == 0
    assert dict(os.environ) == before
    path, argv, env = execs[0]
    assert path == sys.executable and argv[1:5] == ["-m", "uvicorn", "api.bootstrap:bootstrap",
                                                    "--factory"]  # fmt: skip
    assert argv[argv.index("--workers") + 1] == "3" and "--timeout-keep-alive=5" in argv
    assert env["CTXSTORE_DATABASE_URL"] == db and env["CTXSTORE_BIND_HOST"] == "box.lan"


def test_worker_waits_out_a_busy_database_instead_of_exiting(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal

    from sqlalchemy.exc import OperationalError

    from service.runtime import Runtime

    calls: list[int] = []

    def flaky(self: Runtime, *args: object, **kwargs: object) -> int:
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


def test_an_id_used_twice_refuses_the_whole_import(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    """The whole session is refused on the clash; the error names its line.

    An id another session holds is free (ids are unique per session): the
    first import holds ``a1`` too."""
    imported(capsys, db, write(tmp_path / "first.jsonl", SMALL))
    app = CtxStore(url=db)
    try:
        stored = len(app.recorder.select_notifications(start=1, limit=10_000))
    finally:
        app.close()
    clash = [SMALL[0], {"type": "node", "id": "mine1", "role": "user", "input": "a"},
             {"type": "node", "id": "a1", "role": "user", "input": "b"},
             {"type": "node", "id": "mine1", "role": "user", "input": "c"}]  # fmt: skip
    status, _, err = run(capsys, "import", str(write(tmp_path / "second.jsonl", clash)),
                         "--db", db)  # fmt: skip
    assert status == 2 and "duplicate_node" in err and "line 4" in err
    app = CtxStore(url=db)
    try:
        assert len(app.recorder.select_notifications(start=1, limit=10_000)) == stored
    finally:
        app.close()


def test_import_compacts_the_head_as_the_api_would(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    """An import is one write, so the compaction each append would have run runs after it."""
    from service.runtime import Runtime

    words = " ".join(f"word{i}" for i in range(80))
    lines: list[object] = [{"type": "session", "model": "openai:gpt-4o", "context_window": 3000,
                            "at": "2026-01-01T10:00:00Z"}]  # fmt: skip
    for turn in range(20):
        lines.append({"type": "node", "role": "user", "input": f"question {turn}: {words}"})
        lines.append({"type": "node", "role": "assistant", "output": f"answer {turn}: {words}"})
    sid = imported(capsys, db, write(tmp_path / "long.jsonl", lines))
    runtime = Runtime(db)
    try:
        budget = runtime.budget(sid)
        assert budget["status"] == "ok", budget
        kinds = [e.__class__.__name__ for e in runtime.app.session_events(sid)]
        assert "SummaryRecorded" in kinds
    finally:
        runtime.close()


def test_content_at_the_nesting_limit_imports_and_exports(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    from domain.limits import MAX_DEPTH

    deep: object = "leaf"
    for _ in range(MAX_DEPTH):
        deep = [deep]
    lines = [SMALL[0], {"type": "node", "id": "d1", "role": "user", "input": deep}]
    sid = imported(capsys, db, write(tmp_path / "deep.jsonl", lines))
    status, out, err = run(capsys, "export", sid, "--db", db)
    assert status == 0, err
    assert json.loads(out.splitlines()[1])["data"]["input"] == deep
    deeper = [SMALL[0], {"type": "node", "id": "d2", "role": "user", "input": [deep]}]
    status, _, err = run(capsys, "import", str(write(tmp_path / "d2.jsonl", deeper)), "--db", db)
    assert status == 2 and "line 2" in err and "nests deeper" in err
    very = "[" * 100_000 + "]" * 100_000  # deeper than Python's JSON reader can go
    text = json.dumps(SMALL[0]) + '\n{"type": "node", "role": "user", "input": ' + very + "}\n"
    (tmp_path / "d3.jsonl").write_text(text, encoding="utf-8")
    status, _, err = run(capsys, "import", str(tmp_path / "d3.jsonl"), "--db", db)
    assert status == 2 and "line 2" in err and "Traceback" not in err


def test_a_lone_surrogate_is_refused_by_line(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "s.jsonl", SMALL, {2: '{"type": "node", "role": "user", '
                                               '"input": "\\ud800"}'})  # fmt: skip
    status, _, err = run(capsys, "import", str(path), "--db", db)
    assert status == 2 and "line 2" in err and "surrogate" in err, err
    title = write(tmp_path / "t.jsonl", [{"type": "session", "model": "a:b", "title": "\ud800"}])
    status, _, err = run(capsys, "import", str(title), "--db", db)
    assert status == 2 and "line 1" in err and "surrogate" in err, err


def test_rebuild_without_the_tokenizer_empties_nothing(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from domain import tokens
    from projections.rebuild import digest
    from projections.store import ProjectionStore

    imported(capsys, db, write(tmp_path / "t.jsonl", SMALL))
    store = ProjectionStore(db)
    try:
        before = digest(store)

        def unavailable() -> None:
            raise tokens.TokenizerUnavailable("no encoding files")

        monkeypatch.setattr(tokens, "_encoder", unavailable)
        status, _, err = run(capsys, "rebuild", "--db", db)
        assert status == 1 and "tokenizer_unavailable" in err
        assert digest(store) == before
    finally:
        store.close()


@pytest.mark.parametrize("url", ["", "sqlite://", "sqlite:///", "sqlite:///:memory:"])
def test_database_urls_that_could_never_work_are_refused(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    for command in (["migrate"], ["import", str(SAMPLE)], ["export", str(uuid.UUID(int=1))]):
        status, out, err = run(capsys, *command, "--db", url)
        assert status == 2 and "bad_database_url" in err and out == "", (command, err)


def test_a_file_that_is_not_a_database_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_text("these are my notes, not a database\n" * 200, encoding="utf-8")
    for command in (["export", str(uuid.UUID(int=1))], ["import", str(SAMPLE)]):
        status, _, err = run(capsys, *command, "--db", f"sqlite:///{bogus}")
        assert status == 1 and err.startswith("error: database_") and "not a database" in err
        assert err.count("\n") == 1, err


@pytest.mark.postgres
@pytest.mark.skipif("postgres" not in STORES, reason="PostgreSQL is not among the test stores")
def test_an_unusable_postgres_database_is_named_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = pg_admin_url().rsplit("/", 1)[0] + "/ctxstore_no_such_database"
    for command in (["export", str(uuid.UUID(int=1))], ["replay", str(uuid.UUID(int=1)),
                                                         "--to", "1"]):  # fmt: skip
        started = time.monotonic()
        status, _, err = run(capsys, *command, "--db", url)
        assert status == 1 and "does not exist" in err, err
        assert time.monotonic() - started < 20  # not eventsourcing's 30 s pool wait


def test_export_into_a_closed_pipe_stops_quietly(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ctxstore export … | head -1``: the reader leaving is not an error to trace back."""
    sid = imported(capsys, db, SAMPLE)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte, whatever the pipe holds
    with os.fdopen(write_end, "w") as closed:
        monkeypatch.setattr(sys, "stdout", closed)
        assert cli.main(["export", sid, "--db", db]) == 1
        monkeypatch.undo()
    assert "Traceback" not in capsys.readouterr().err


def test_an_export_imports_again_into_the_store_it_came_from(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    """A second copy keeps its node ids: they are unique per session, not per store."""
    sid = imported(capsys, db, SAMPLE)
    out = tmp_path / "export.jsonl"
    assert run(capsys, "export", sid, "--db", db, "--out", str(out))[0] == 0
    status, copy, err = run(capsys, "import", str(out), "--db", db)
    assert status == 0, err
    app = CtxStore(url=db)
    try:
        ids = [[getattr(e, "node_id", None) for e in app.session_events(s)]
               for s in (sid, copy.strip())]  # fmt: skip
    finally:
        app.close()
    assert ids[0] == ids[1] and len(set(ids[0]) - {None}) > 1


def test_importing_an_export_recreates_the_session(
    capsys: pytest.CaptureFixture[str], store_url: str, tmp_path: Path
) -> None:
    """New session id, node ids as in the file, the same head, commits and renders."""
    from service.runtime import Runtime

    source = f"sqlite:///{tmp_path}/source.db"
    rt = Runtime(source)
    try:
        sid = str(rt.execute("start_session", title="orig", model="local:tiny",
                             at=datetime(2026, 1, 1, tzinfo=UTC))[0])  # fmt: skip
        for i in range(12):
            at = datetime(2026, 1, 1, 0, i, tzinfo=UTC)
            rt.execute("append_nodes", sid, at=at, nodes=[
                {"role": "user", "node_id": f"x-u{i}", "input": f"q{i} " + "word " * 450},
                {"role": "assistant", "node_id": f"x-a{i}", "output": f"a{i}"},
                {"role": "tool", "node_id": f"x-t{i}", "name": "read", "input": {"i": i},
                 "output": "line\n" * 50},
            ])  # fmt: skip
            if i == 2:
                rt.execute("pin", sid, node_id="x-u0", at=at)
                rt.execute("add_sibling", sid, of="x-a2", kind="retry", output="again",
                           node_id="x-a2r", at=at)  # fmt: skip
                rt.execute("checkout", sid, node_id="x-t2", at=at)
                rt.execute("measure_usage", sid, request_id="r", at=at,
                           usage={"input_tokens": 10, "cache_read_input_tokens": 5})  # fmt: skip
                rt.execute("merge", sid, peers=[{"node_id": "x-a2r"}], at=at)
            if i == 5:
                rt.execute("start_run", sid, run_id="run", at=at)
                rt.execute("finish_run", sid, at=at)
                rt.execute("switch_model", sid, model="local:tiny", context_window=7000, at=at)
                rt.execute("declare_tools", sid, [{"name": "read", "description": "a file"}],
                           at=at)  # fmt: skip
                rt.execute("configure_compaction", sid, "keep paths", None, at=at)
            if i == 8:
                rt.compact(sid)  # a summary the export carries (the window guard folds the rest)
        original = {"info": rt.session_info(sid), "timeline": rt.timeline(sid),
                    "context": rt.head_commit(sid),
                    "render": rt.rendered(sid, "anthropic")["request"]}  # fmt: skip
        kinds = {type(e).__name__ for e in rt.app.session_events(sid)}
        assert {"SummaryRecorded", "MergeCompleted", "UsageMeasured"} <= kinds
    finally:
        rt.close()
    out = tmp_path / "export.jsonl"
    assert run(capsys, "export", sid, "--db", source, "--out", str(out))[0] == 0
    new = imported(capsys, store_url, out)
    assert new != sid
    rt = Runtime(store_url)
    try:
        info = rt.session_info(new)
        same = ("head", "version", "title", "model", "pinned", "running", "created_at", "counts")
        assert {k: info[k] for k in same} == {k: original["info"][k] for k in same}

        # commit ids derive from the session id; everything else is the same
        def strip(row: dict[str, object]) -> dict[str, object]:
            return {k: v for k, v in row.items() if k not in ("commit_id", "parent_ids")}

        assert [strip(r) for r in rt.timeline(new)] == [strip(r) for r in original["timeline"]]
        context = rt.head_commit(new)
        assert context["items"] == original["context"]["items"]
        assert context["head_node_id"] == original["context"]["head_node_id"]
        assert rt.rendered(new, "anthropic")["request"] == original["render"]
    finally:
        rt.close()
    # the same file again: a third session, with the same node ids (unique per session)
    status, _, err = run(capsys, "import", str(out), "--db", store_url)
    assert status == 0, err


def test_an_export_that_names_a_session_not_here_is_refused_by_line(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    out = tmp_path / "export.jsonl"
    lines = [
        {"seq": 1, "type": "SessionStarted", "timestamp": "2026-01-01T00:00:00+00:00",
         "data": {"title": "t", "model": "openai:gpt-4o", "context_window": None,
                  "branched_from": None}},
        {"seq": 2, "type": "AttachStaged", "timestamp": "2026-01-01T00:00:01+00:00",
         "data": {"node_id": "att", "seq": 1, "predecessor": None, "commit": None,
                  "source_session": "00000000-0000-0000-0000-000000000042",
                  "source_head": "h"}},
    ]  # fmt: skip
    write(out, lines)  # type: ignore[arg-type]
    status, _, err = run(capsys, "import", str(out), "--db", db)
    assert status == 2 and "line 2:" in err and "session_not_found" in err, err
    write(out, [lines[0], {**lines[1], "seq": 3}])  # type: ignore[arg-type]
    status, _, err = run(capsys, "import", str(out), "--db", db)
    assert status == 2 and "seq 3 where 2 was due" in err, err


def test_retry_and_edit_lines_record_the_kind_they_name(
    capsys: pytest.CaptureFixture[str], store_url: str, tmp_path: Path
) -> None:
    """A retry line with new text is a new sample; an edit line with the same text an edit."""
    records = SMALL[:7] + [
        {"type": "retry", "of": "a2", "id": "a2r", "output": "Done, said differently."},
        {"type": "edit", "of": "a2", "id": "a2e", "output": "Done."},
    ]
    sid = imported(capsys, store_url, write(tmp_path / "t.jsonl", records))
    status, out, _ = run(capsys, "export", sid, "--db", store_url)
    assert status == 0
    kinds = {r["data"]["node_id"]: r["data"]["version_kind"]
             for r in map(json.loads, out.splitlines()) if r["type"] == "NodeAppended"}  # fmt: skip
    assert (kinds["a2r"], kinds["a2e"]) == ("retry", "edit")


def test_usage_lines_take_the_providers_own_object(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    usage = {"prompt_tokens": 1300, "prompt_tokens_details": {"cached_tokens": 1024},
             "completion_tokens": 60}  # fmt: skip
    records = SMALL[:4] + [{"type": "usage", "request_id": "r9", "usage": usage}]
    sid = imported(capsys, db, write(tmp_path / "t.jsonl", records))
    status, out, _ = run(capsys, "export", sid, "--db", db)
    last = json.loads(out.splitlines()[-1])
    assert status == 0 and last["type"] == "UsageMeasured"
    assert last["data"]["native"] == usage and last["data"]["total_input"] == 1300


def test_replay_renders_the_request_as_it_stood_at_each_event(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    """What /render answered after each command, replayed from the log in memory."""
    from projections.rebuild import digest
    from projections.store import ProjectionStore
    from service.runtime import Runtime

    rt = Runtime(store_url)
    seen: dict[tuple[str, int], dict[str, dict[str, object]]] = {}

    def record(sid: str) -> None:
        version = rt.session_version(sid)
        seen[(sid, version)] = {s: rt.rendered(sid, s)["request"]
                                for s in ("neutral", "openai", "anthropic")}  # fmt: skip

    try:
        sid = str(rt.execute("start_session", title="r", model="local:tiny")[0])
        other = str(rt.execute("start_session", title="src")[0])
        rt.execute("append_node", other, role="user", input="context from elsewhere")
        for i in range(14):  # enough to age tools and make the tiny window compact
            rt.execute("append_node", sid, role="user", input=f"question {i} " + "word " * 250)
            rt.execute("append_node", sid, role="assistant", output=f"answer {i}")
            rt.execute("append_node", sid, role="tool", name="read", input={"i": i},
                       output="line\n" * 60)  # fmt: skip
            record(sid)
            if i == 3:
                rt.execute("pin", sid, node_id=rt.dag(sid)["nodes"][0]["node_id"])
                rt.execute("attach", sid, source_session=other)
                record(sid)
            if i == 6:
                rt.execute("measure_usage", sid, request_id="r", input_tokens=900)
                rt.execute("switch_model", sid, model="local:tiny", context_window=6000)
                record(sid)
        last = rt.dag(sid)["nodes"][-1]["node_id"]
        branch = str(rt.execute("branch", sid, node_id=last)[0])
        rt.execute("append_node", branch, role="user", input="on the branch")
        record(branch)
        assert "SummaryRecorded" in {type(e).__name__ for e in rt.app.session_events(sid)}
    finally:
        rt.close()
    store = ProjectionStore(store_url)
    before = digest(store)
    for (session, version), shapes in seen.items():
        for shape, request in shapes.items():
            status, out, err = run(capsys, "replay", session, "--to", str(version), "--render",
                                   shape, "--db", store_url)  # fmt: skip
            assert status == 0, err
            assert json.loads(out) == request, (session, version, shape)
    assert digest(store) == before  # nothing written to the live projection
    store.close()
    status, _, err = run(capsys, "replay", sid, "--to", "1", "--render", "openai", "--db",
                         store_url)  # fmt: skip
    assert status == 2 and "no commit at event 1" in err
