"""A session that shows every part of the inspector, built over HTTP.

Tool results age out of the tail window; a pasted test log pushes the
history past the emergency line and then the compaction threshold of a
small context window, so the offline summarizer folds the oldest run; an
assistant turn is retried; notes from another session are attached; a
branch goes its own way and is merged back.  The browser tests and
``scripts/inspector_screenshot.py``-style tries build it through any
``httpx.Client``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

WINDOW = 4_400  # small, so the history passes the compaction threshold
# The rules the tour runs under: aging as soon as due (no cache batching) and
# compaction at 80% down to 50%, so each rule shows in its own commit, one at
# a time, rather than together in the batches today's defaults make.
TOUR_POLICY = '{"batch_trigger": 0, "clear_at_least": 0, "compact_at": 0.8, "summary_target": 0.5}'


@dataclass(frozen=True)
class Tour:
    sid: str  # the main session
    branch_sid: str
    notes_sid: str  # attached into the main session
    merge: str  # the merge node
    attach: str  # the attach node


def post(client: httpx.Client, path: str, body: dict[str, Any]) -> Any:
    response = client.post(path, json=body)
    assert 200 <= response.status_code < 300, response.text
    return response.json()


def at(minute: int) -> str:
    return f"2026-03-01T{9 + minute // 60:02d}:{minute % 60:02d}:00+00:00"


def build(client: httpx.Client) -> Tour:
    c = client

    def node(sid: str, node_id: str, role: str, minute: int, **fields: Any) -> None:
        post(c, f"/sessions/{sid}/nodes",
             {"node_id": node_id, "role": role, "at": at(minute), **fields})  # fmt: skip

    sid = post(c, "/sessions", {"title": "inspector tour: fix the parser",
                                "model": "openai:gpt-4o", "context_window": WINDOW,
                                "at": at(0)})["session_id"]  # fmt: skip
    s = f"/sessions/{sid}"
    node(sid, "sys", "system", 0, input="You are a careful coding agent.")
    node(sid, "task", "user", 1, input="The duration parser rejects '1h30m'. Fix it.")
    post(c, f"{s}/pin", {"node_id": "task"})
    for turn in range(1, 7):
        node(sid, f"a{turn}", "assistant", 2 + turn * 3,
             output=f"Step {turn}: reading parser part {turn}.")  # fmt: skip
        body = "\n".join(f"def part_{turn}_{i}(): return {i}  # parser line" for i in range(40))
        node(sid, f"t{turn}", "tool", 3 + turn * 3, name="read_file", output=body,
             input={"path": f"src/parser_{turn}.py"}, call_id=f"call_{turn}")  # fmt: skip
    log = "\n".join(f"FAILED tests/test_parser.py::test_compound[{i}h{i}m] - DurationError"
                    for i in range(52))  # fmt: skip
    node(sid, "u_log", "user", 24, input="Here is the failing test run:\n" + log)
    fixing = "The unit regex stops after one unit; fixing it."
    node(sid, "a7", "assistant", 25, output=fixing)
    post(c, f"{s}/nodes/a7/retry", {"node_id": "a7r", "at": at(26), "output": fixing})
    post(c, f"{s}/checkout", {"node_id": "a7", "version": 1})

    branch = post(c, f"{s}/branch", {"node_id": "a7", "title": "alternative: a scanner",
                                     "at": at(29)})  # fmt: skip
    bid = branch["session_id"]
    node(bid, "b1", "user", 30, input="Try a hand-written scanner instead.")
    node(bid, "b2", "assistant", 31, output="A scanner reads number-unit pairs in a loop.")

    notes = post(c, "/sessions", {"title": "notes: duration formats", "at": at(27)})
    nid = notes["session_id"]
    node(nid, "n1", "user", 27, input="Go's time.ParseDuration accepts '1h30m' and '1.5h'.")

    node(sid, "u2", "user", 33, input="Compare with the scanner idea and the notes.")
    attach = post(c, f"{s}/attach", {"source_session": nid, "at": at(33)})
    merged = post(c, f"{s}/merge", {"at": at(34),
                                    "peers": [{"session_id": bid, "node_id": "b2"}]})  # fmt: skip
    node(sid, "a8", "assistant", 35, output="Both agree: parse unit pairs until the end.")
    result = "\n".join(["58 passed, 2 failed", *[f"case {i}: ok" for i in range(8)]])
    node(sid, "t7", "tool", 36, name="run_tests", input={"args": "tests/test_parser.py"},
         output=result)  # fmt: skip
    steps = ("Fixing the two failing cases.", "Both pass now.", "Running the whole suite.",
             "Done: '1h30m' parses, and every format round-trips.")  # fmt: skip
    for offset, text in enumerate(steps):
        node(sid, f"a{9 + offset}", "assistant", 37 + offset, output=text)
    return Tour(sid=sid, branch_sid=bid, notes_sid=nid, merge=merged["node_id"],
                attach=attach["node_id"])  # fmt: skip
