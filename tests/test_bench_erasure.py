"""``scripts/bench_erasure.py`` runs, and both of its erasures leave a rebuild-equal store."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import bench_erasure


def test_it_erases_both_ways_and_re_projects_only_the_referrer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_erasure.main(["--sessions", "20", "--turns", "1", "--dir", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()[-2:]  # the function asserts rebuild == live
    assert rows[0].startswith("before (full rebuild)") and rows[0].endswith("all")
    assert rows[1].startswith("after (re-project)") and rows[1].split()[-1] == "1"
