"""``scripts/bench_retention.py`` and its coding-agent run: what they check is what they say.

The planted facts must be in the run where they are said to be, their questions must not
give the answer away (a recall query that holds the answer finds it trivially), and the
checker must be verbatim.  The bench's own path runs on a tiny conversation; its figures
are never asserted (they are measurements, not properties).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domain.policy import Policy
from scripts import bench_retention
from scripts.coding_workload import ctx_nodes
from scripts.planted_facts import FACTS, found, normalize, planted
from scripts.retention_coding import node_text, run_coding, truncate
from service.runtime import Runtime


def test_without_the_data_it_says_so_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_retention.main(["--data", str(tmp_path / "absent")]) == 0
    assert "no LoCoMo conversations" in capsys.readouterr().out


def test_twenty_varied_facts_each_planted_once_and_asked_without_its_answer() -> None:
    assert len(FACTS) == 20
    assert {f.where for f in FACTS} == {"user", "assistant", "read", "shell"}
    texts = [node_text(n) for turn, _ in planted(170) for n in ctx_nodes(turn)]
    assert sum(1 for _ in planted(170)) == 170
    for fact in FACTS:
        assert not found(fact.answer, [fact.question]), fact.question
        assert sum(found(fact.answer, [t]) for t in texts) == 1, fact.answer
    reads = [t for turn, _ in planted(170) for t in turn.tools if t.name == "read_file"]
    for fact in (f for f in FACTS if f.where == "read"):
        (tool,) = (t for t in reads if t.args == {"path": fact.target})
        assert tool.result.splitlines()[2] == fact.text  # line 3 of the file


def test_the_run_is_the_same_every_time_and_has_about_350_tool_calls() -> None:
    first = [(turn, here) for turn, here in planted(170)]
    assert first == list(planted(170))
    assert 330 <= sum(len(turn.tools) for turn, _ in first) <= 370
    assert sum(len(here) for _, here in first) == 20


def test_found_is_verbatim_on_word_boundaries() -> None:
    assert found("88.4%", ["TOTAL   1843   212   88.4%"])
    assert not found("88.4%", ["coverage 188.4 of it"])
    assert not found("8743", ["port 87430"])
    assert found("make migrate exited with status 2", ["[make migrate exited with status 2]"])
    assert not found("exited with status 2", ["exited with status 20"])
    assert not found("", ["anything"])
    assert normalize("X-Request-Budget") == "x request budget"


def test_truncation_keeps_the_latest_items_that_fit() -> None:
    assert truncate([5, 5, 5, 5], 3, 11) == ([1, 2], 10)
    assert truncate([50], 1, 10) == ([], 0)


def test_the_coding_run_checks_render_and_recall_separately() -> None:
    asked: list[str] = []

    def recall(rt: object, sid: str, question: str) -> list[str]:
        asked.append(question)
        return ["nothing of use"]

    result = run_coding(8000, Policy(), turns=40, recall=recall)
    assert [f.answer for f in result.planted] == [f.answer for f in FACTS]
    assert asked == [f.question for f in FACTS]
    assert result.recall is not None and set(map(id, result.recall)) == set(
        map(id, result.render)
    )  # the stub recall finds nothing: render-or-recall is the render
    assert run_coding(8000, Policy(), turns=40).recall is None  # no recall: n/a


def test_the_bench_runs_on_a_small_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turns = [{"speaker": "Ann" if i % 2 else "Bob", "dia_id": f"D1:{i}",
              "text": f"Turn {i}: the blue kettle number {i} sits on shelf {i * 7}."}
             for i in range(1, 121)]  # fmt: skip
    conv = {"speaker_a": "Ann", "speaker_b": "Bob", "session_1": turns,
            "session_1_date_time": "1:47 pm on 18 May, 2023",
            "qa": [{"question": "Where does kettle 3 sit?", "answer": "shelf 21",
                    "evidence": ["D1:3"], "category": 4},
                   {"question": "Is there a dragon?", "answer": "no", "evidence": ["D1:4"],
                    "category": 5}]}  # fmt: skip
    (tmp_path / "1.json").write_text(json.dumps(conv))
    argv = ["--data", str(tmp_path), "--windows", "8000", "--coding-turns", "30",
            "--cache-calls", "0"]  # fmt: skip
    assert bench_retention.main(argv) == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line[:3] == "8k "}
    assert rows["1"][2] == "1"  # one check: the category 5 question is left out
    assert rows["coding"][2] == "20"
    if not hasattr(Runtime, "recall"):
        assert rows["coding"][5] == "n/a" and rows["1"][5] == "n/a"
