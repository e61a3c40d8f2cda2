"""Progress bars: on a terminal only, and never in piped output.

The deciding function and the bar itself are tested with fake streams and
a fake clock; the commands (import, export, rebuild) run in-process with
stderr as a fake terminal, and once with stderr captured (a pipe), where
they must write nothing at all.  One subprocess checks a real pty.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import cli, progress
from scripts.progress import Progress, line, wanted

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "scripts" / "sample_session.jsonl"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bars_are_wanted_on_a_terminal_only() -> None:
    assert wanted(Terminal(), {})
    assert not wanted(io.StringIO(), {})
    assert not wanted(Terminal(), {"TERM": "dumb"})
    assert not wanted(Terminal(), {"CTXSTORE_PROGRESS": "0"})
    assert wanted(io.StringIO(), {"CTXSTORE_PROGRESS": "1"})
    closed = io.StringIO()  # isatty raises on a closed stream
    closed.close()
    assert not wanted(closed, {})


def test_a_line_says_how_far() -> None:
    assert line("export", 0, 200, "events") == (
        "export [----------------------------]   0%  0/200 events"
    )
    assert line("export", 100, 200, "events").startswith("export [##############-------")
    assert line("export", 2500, 2500, "events").endswith("100%  2,500/2,500 events")
    assert line("import: compacting", 3, None, "summaries") == "import: compacting  3 summaries"


def test_a_bar_waits_then_redraws_at_most_every_interval() -> None:
    out, clock = Terminal(), Clock()
    bar = Progress("rebuild", 1000, "events", stream=out, clock=clock)
    bar.update(10)
    assert out.getvalue() == ""  # quick work never shows a bar
    clock.now += progress.DELAY
    bar.update(20)
    assert out.getvalue() == "\r" + line("rebuild", 20, 1000, "events")
    clock.now += progress.INTERVAL / 2
    bar.update(30)
    assert out.getvalue().count("\r") == 1
    clock.now += progress.INTERVAL
    bar.update(1000)
    bar.close()
    assert out.getvalue().endswith(line("rebuild", 1000, 1000, "events") + "\n")


def test_quick_or_piped_work_writes_nothing() -> None:
    quick, clock = Terminal(), Clock()
    with Progress("export", 5, stream=quick, clock=clock) as bar:
        bar.update(5)
    piped = io.StringIO()
    with Progress("export", 5, stream=piped, clock=clock, delay=0) as bar:
        bar.update(5)
    assert quick.getvalue() == "" and piped.getvalue() == ""


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/x.db"


def test_commands_stay_quiet_when_stderr_is_not_a_terminal(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "DELAY", 0.0)  # even work that would show at once
    monkeypatch.delenv("CTXSTORE_PROGRESS", raising=False)
    assert cli.main(["import", str(SAMPLE), "--db", db]) == 0
    sid = capsys.readouterr().out.strip()
    assert cli.main(["export", sid, "--db", db, "--out", str(tmp_path / "e.jsonl")]) == 0
    assert cli.main(["rebuild", "--db", db]) == 0
    assert capsys.readouterr().err == ""


def test_commands_draw_bars_on_a_terminal_and_keep_stdout_clean(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.delenv("CTXSTORE_PROGRESS", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main(["import", str(SAMPLE), "--db", db]) == 0
    sid = capsys.readouterr().out.strip()
    assert len(sid) == 36  # stdout is still only the id
    lines = SAMPLE.read_text().count("\n") - 1
    assert f"\rimport: running lines [{'#' * progress.WIDTH}] 100%  {lines}/{lines} lines\n" in (
        err.getvalue())  # fmt: skip
    assert "\rimport: projecting [" in err.getvalue()
    out = tmp_path / "e.jsonl"
    assert cli.main(["export", sid, "--db", db, "--out", str(out)]) == 0
    events = out.read_text().count("\n")
    assert f"100%  {events}/{events} events\n" in err.getvalue()
    assert cli.main(["rebuild", "--db", db]) == 0
    assert "\rrebuild [" in err.getvalue()
    assert capsys.readouterr().out.startswith("{")  # the rebuild report, untouched


def test_a_real_terminal_gets_the_bar_and_a_pipe_does_not() -> None:
    code = ("from scripts.progress import Progress\n"
            "with Progress('work', 3, 'steps', delay=0) as bar:\n"
            "    for i in range(4): bar.update(i)\n")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("CTXSTORE_PROGRESS", "TERM")}
    env["PYTHONPATH"] = str(ROOT)
    leader, follower = os.openpty()
    try:
        subprocess.run([sys.executable, "-c", code], stderr=follower, env=env, check=True,
                       timeout=60)  # fmt: skip
        shown = os.read(leader, 65536).decode()
    finally:
        os.close(leader)
        os.close(follower)
    assert "work [" in shown and "3/3 steps" in shown
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env,
                           check=True, timeout=60)  # fmt: skip
    assert piped.stderr == b""
