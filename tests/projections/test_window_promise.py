"""The window promise: the seven findings of issue 11, each reproduced.

Long sessions, merges and attaches used to render past the window, freeze
history or copy it twice; explain described the wrong item; an import made
other commits than the API; aging rewrote the prompt-cache prefix every
turn.  Each test drives a real ``Runtime`` the way the issue's repro did and
checks what a user reads: ``/budget``, ``/render``, ``/explain``, the
timeline.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from domain.policy import Policy
from service.runtime import Runtime
from tests.conftest import empty_store, immediate_policy
from tests.projections.test_context_commit import add, at, by_id, start

WORDS = " ".join(f"word{i}" for i in range(60))


def fits(rt: Runtime, sid: str) -> dict[str, Any]:
    """The head's budget, after checking the request fits or says why not."""
    budget = rt.budget(sid)
    if budget["over_window"]:
        assert budget["shortfall"] == budget["request_tokens"] - budget["limit"] > 0
    else:
        assert budget["request_tokens"] <= budget["limit"], budget
    return budget


def visible(rt: Runtime, sid: str) -> list[dict[str, Any]]:
    return [i for i in rt.head_commit(sid)["items"] if i["state"] != "summarized"]


def agent_turns(rt: Runtime, sid: str, turns: int, start_minute: float = 1,
                check: bool = True) -> None:  # fmt: skip
    for n in range(turns):
        minute = start_minute + n
        add(rt, sid, "user", f"question {n}: {WORDS}", minute)
        add(rt, sid, "assistant", f"answer {n}: {WORDS}", minute + 0.5)
        if check:
            fits(rt, sid)


# -------------------------------------------------- 1. summaries fold again


def test_a_long_session_stays_inside_its_window(store_url: str) -> None:
    """Finding 1: from turn ~130 of 300 the head was 'emergency' with 218 summaries."""
    rt = Runtime(store_url)  # auto-compaction with the offline summarizer
    try:
        sid, _ = rt.execute("start_session", "long", "openai:gpt-4o", context_window=4_000,
                            at=at(0))  # fmt: skip
        add(rt, sid, "system", "You are terse.")
        agent_turns(rt, sid, 120)
        budget = fits(rt, sid)
        assert not budget["over_window"] and budget["status"] != "emergency"
        summaries = [i for i in visible(rt, sid) if i["state"] == "summary"]
        assert len(summaries) <= 2, "summaries fold into higher-level ones"
        assert max(i["level"] for i in summaries) > 1
        request = rt.rendered(sid, "anthropic")
        assert not request["over_window"]
    finally:
        rt.close()


def test_without_a_summarizer_the_guard_still_keeps_the_window(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False)
    try:
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=4_000,
                            at=at(0))  # fmt: skip
        agent_turns(rt, sid, 80)
        rows = rt.timeline(sid)
        assert len(rows) == 160
        rules = {r["rule"] for r in rt.explain(sid, rt.head_commit(sid)["items"][0]
                                               ["item_id"])["transitions"]}  # fmt: skip
        assert rules <= {"window_guard"}
    finally:
        rt.close()


def test_only_pins_alone_may_exceed_the_window(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False)
    try:
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=4_000,
                            at=at(0))  # fmt: skip
        for n in range(2):
            kept = add(rt, sid, "user", f"keep {n} " * 600, n)
            rt.execute("pin", sid, kept, at=at(n))
        agent_turns(rt, sid, 3, start_minute=3)
        assert not fits(rt, sid)["over_window"]
        rt.execute("switch_model", sid, "openai:gpt-4o", 1_000, at=at(9))  # pins alone: ~1,200
        budget = fits(rt, sid)
        assert budget["over_window"] and budget["shortfall"] > 0
        assert "pinned" in budget["over_window_reason"]
        assert rt.rendered(sid, "openai")["over_window"]
        for item in visible(rt, sid):  # all the rest is folded away
            assert item["locked"] or item["state"] == "summary", item
    finally:
        rt.close()


def test_a_checkout_under_a_smaller_window_says_it_no_longer_fits(rt: Runtime) -> None:
    """A commit made under 32k, shown at a checkout after a switch to 2k."""
    sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=32_000, at=at(0))
    sid = str(sid)
    agent_turns(rt, sid, 12)
    old = rt.head_commit(sid)["head_node_id"]
    assert fits(rt, sid)["request_tokens"] > 2_000
    agent_turns(rt, sid, 1, start_minute=20)  # the switch below re-runs this head, not ``old``
    rt.execute("switch_model", sid, "openai:gpt-4o", 2_000, at=at(30))
    add(rt, sid, "user", "and now?", 31)
    assert not fits(rt, sid)["over_window"]  # the new head was made for 2k
    rt.execute("checkout", sid, old, at=at(32))  # nothing re-runs at a checkout
    budget = fits(rt, sid)
    assert budget["over_window"] and budget["shortfall"] > 0
    assert "another window" in budget["over_window_reason"]
    rendered = rt.rendered(sid, "openai")
    assert rendered["over_window"] and rendered["shortfall"] == budget["shortfall"]


def test_a_system_prompt_past_the_window_is_said_too(rt: Runtime) -> None:
    sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=1_000, at=at(0))
    add(rt, str(sid), "system", "rule " * 1_500)
    add(rt, str(sid), "user", "hello", 1)
    budget = fits(rt, str(sid))
    assert budget["over_window"] and "system" in budget["over_window_reason"]


# ------------------------------------------------------ 2. merge compacts


def test_a_merge_leaves_the_merged_context_free_to_compact(store_url: str) -> None:
    """Finding 2: after a merge 22/26 items stayed locked, /compact answered 409."""
    rt = Runtime(store_url, policy=immediate_policy(tail_turns=2))
    try:
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=6_000,
                            at=at(0))  # fmt: skip
        add(rt, sid, "user", "the task")
        fork = add(rt, sid, "assistant", "plan", 1)
        for n in range(6):
            add(rt, sid, "assistant", f"peer step {n}", 2 + n)
            add(rt, sid, "tool", name="grep", output=f"peer hit {n}\n" * 40, minute=2 + n)
        peer = rt.head_commit(sid)["head_node_id"]
        rt.execute("checkout", sid, fork, at=at(10))
        for n in range(6):
            add(rt, sid, "assistant", f"base step {n}", 11 + n)
            add(rt, sid, "tool", name="cat", output=f"base out {n}\n" * 40, minute=11 + n)
        base_tool = [i for i in visible(rt, sid) if i["name"] == "cat"][-1]["item_id"]
        rt.execute("merge", sid, [{"node_id": peer}], at=at(20))
        assert not any(i["locked"] for i in visible(rt, sid)), "nothing is locked for good"
        agent_turns(rt, sid, 25, start_minute=21)
        assert by_id(rt, sid)[base_tool]["state"] != "full", "the base block compacts too"
        last_user = [i for i in visible(rt, sid) if i["role"] == "user"][-1]
        assert last_user["state"] == "full", "the latest instruction is never what gets folded"
        compacted = rt.compact(sid)
        assert compacted["covered"]
    finally:
        rt.close()


# ------------------------------------------- 3. attach copies what is new


def branch_with_turns(rt: Runtime, sid: str, at_node: str, turns: int) -> str:
    branch, _ = rt.execute("branch", sid, at_node, at=at(30))
    for n in range(turns):
        add(rt, str(branch), "user", f"branch question {n}", 31 + n)
        add(rt, str(branch), "assistant", f"branch answer {n}", 31 + n)
    return str(branch)


def test_an_attach_copies_only_what_the_target_lacks(rt: Runtime) -> None:
    """Finding 3: 59 of 69 attached items were already in the target."""
    sid = start(rt)
    first = add(rt, sid, "user", "the first message")
    for n in range(5):
        add(rt, sid, "assistant", f"step {n}", 1 + n)
    branch = branch_with_turns(rt, sid, rt.head_commit(sid)["head_node_id"], 2)
    node, _ = rt.execute("attach", sid, branch, at=at(40))
    copied = [i for i in rt.head_commit(sid)["items"] if i["attached_from"]]
    assert [i["role"] for i in copied] == ["marker"] + ["user", "assistant"] * 2 + ["marker"]
    assert not any(i["source_node_id"] == first for i in copied)
    texts = json.dumps(rt.rendered(sid, "anthropic")["request"])
    assert texts.count("the first message") == 1


# ----------------------------------------- 4. explain answers for the head


def test_explain_answers_for_the_item_the_head_shows(rt: Runtime) -> None:
    """Finding 4: explain of a pinned t1 answered the attached copy's state."""
    sid = start(rt)
    add(rt, sid, "user", "task")
    add(rt, sid, "assistant", "calling", 1)
    tool = add(rt, sid, "tool", name="grep", output="hit\n" * 30, minute=2)
    rt.execute("pin", sid, tool, at=at(3))
    branch = branch_with_turns(rt, sid, tool, 4)
    rt.execute("attach", sid, branch, at=at(50))
    shown = by_id(rt, sid)[tool]
    out = rt.explain(sid, tool)
    assert out["current"]["item_id"] == tool
    assert (out["current"]["state"], out["current"]["locked"]) == (shown["state"], True)
    assert out["current"]["state"] == "full"


# ------------------------------------------------------- 5. import = API


def transcript_lines() -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "model": "openai:gpt-4o",
            "context_window": 3_000,
            "at": "2026-01-01T10:00:00Z",
        }
    ]
    lines.append({"type": "node", "id": "s", "role": "system", "input": "be brief"})
    for n in range(20):
        stamp = f"2026-01-01T10:{n + 1:02d}:00Z"
        lines.append(
            {
                "type": "node",
                "id": f"u{n}",
                "role": "user",
                "input": f"question {n}: {WORDS}",
                "at": stamp,
            }
        )
        lines.append(
            {"type": "node", "id": f"a{n}", "role": "assistant", "output": f"calling for {n}"}
        )
        lines.append(
            {
                "type": "node",
                "id": f"t{n}",
                "role": "tool",
                "name": "cat",
                "input": {"n": n},
                "output": f"file {n}\n" * (10 + 5 * (n % 4)),
            }
        )
        if n == 7:
            lines.append(
                {"type": "retry", "of": f"a{n}", "id": f"a{n}b", "output": f"calling again for {n}"}
            )
        if n == 12:
            lines.append({"type": "model", "model": "openai:gpt-4o", "context_window": 2_500})
    return lines  # fmt: skip


def normalised(rt: Runtime, sid: str) -> Any:
    """What a user reads, with the ids that depend on the session id made positional."""
    raw = json.dumps({"events": [type(e).__name__ for e in rt.app.session_events(sid)],
                      "timeline": [{k: v for k, v in c.items() if k not in ("commit_id",
                                    "parent_ids", "created_at")} for c in rt.timeline(sid)],
                      "head": rt.head_commit(sid)["items"]})  # fmt: skip
    seen: dict[str, str] = {}
    return re.sub(
        r"(summary|fold):[0-9a-f:-]+", lambda m: seen.setdefault(m.group(0), f"S{len(seen)}"), raw
    )


def test_an_import_makes_the_commits_posting_its_lines_would(
    store_url: str, tmp_path: Path
) -> None:
    """Finding 5: import compacted only at the end; 20 commits stayed over the threshold."""
    from scripts import transcript

    lines = transcript_lines()
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    kind = "sqlite" if store_url.startswith("sqlite") else "postgres"
    with empty_store(kind, tmp_path, "posted") as other:
        imported = transcript.import_file(store_url, path)
        rt = Runtime(other)
        try:
            sid, _ = rt.execute("start_session", "", "openai:gpt-4o", context_window=3_000,
                                at=transcript.parse_time(lines[0]["at"], 1))  # fmt: skip
            for step in transcript.parse(json.dumps(line) for line in lines)[1:]:
                f = step.fields
                if step.type == "node":
                    rt.execute("append_node", sid, node_id=f.pop("id"), at=step.at, **f)
                elif step.type == "retry":
                    rt.execute("add_sibling", sid, of=f.pop("of"), node_id=f.pop("id"),
                               kind="retry", at=step.at, **f)  # fmt: skip
                else:
                    rt.execute("switch_model", sid, f["model"], f["context_window"], at=step.at)
            posted = normalised(rt, str(sid))
        finally:
            rt.close()
        live = Runtime(store_url)
        try:
            assert normalised(live, imported) == posted
            assert "SummaryRecorded" in posted
        finally:
            live.close()


# ----------------------------------------------------- 6. prompt cache


def cache_run(store_url: str, policy: Policy) -> tuple[int, int]:
    """(calls whose request only appended to the previous one, calls) over 40 tool turns."""
    rt = Runtime(store_url, policy=policy)
    try:
        sid, _ = rt.execute("start_session", "t", "anthropic:claude-sonnet-4",
                            context_window=32_000, at=at(0))  # fmt: skip
        add(rt, sid, "system", "You are a careful engineer.")
        add(rt, sid, "user", "Fix the parser.", 1)
        previous: list[str] | None = None
        appended = calls = 0
        for n in range(40):
            add(rt, sid, "assistant", f"step {n}: reading", 2 + n)
            add(rt, sid, "tool", name="read_file", input={"path": f"f{n}.py"},
                output=f"line of f{n}\n" * 60, minute=2 + n)  # fmt: skip
            request = rt.rendered(sid, "anthropic")["request"]
            blocks = [json.dumps(b, sort_keys=True) for m in request["messages"]
                      for b in m["content"]]  # fmt: skip
            if previous is not None:
                calls += 1
                appended += blocks[: len(previous)] == previous
            previous = blocks
        return appended, calls
    finally:
        rt.close()


def test_batching_keeps_most_requests_append_only(store_url: str, tmp_path: Path) -> None:
    """Finding 6: 33 of 39 calls rewrote an earlier message (one aging a turn)."""
    batched, calls = cache_run(store_url, Policy())
    kind = "sqlite" if store_url.startswith("sqlite") else "postgres"
    with empty_store(kind, tmp_path, "unbatched") as other:
        unbatched, _ = cache_run(other, immediate_policy())
    assert unbatched < calls // 2, "aging a turn at a time rewrites the prefix"
    assert batched >= 0.9 * calls, (batched, calls)


# ---------------------------------------- 7. the audit review's eight findings


def test_lowering_tail_turns_on_a_restart_ages_what_a_rebuild_ages(store_url: str) -> None:
    """Audit 1: a restarted process skipped the tools the lower tail left behind."""
    from projections.rebuild import rebuild_and_compare

    first = Runtime(store_url, auto_compact=False, policy=immediate_policy(tail_turns=4))
    sid = start(first)
    add(first, sid, "user", "task")
    add(first, sid, "assistant", "calling", 1)
    tool = add(first, sid, "tool", name="grep", output="hit\n" * 20, minute=2)
    for n in range(3):
        add(first, sid, "assistant", f"turn {n}", 3 + n)
    assert by_id(first, sid)[tool]["state"] == "full"
    first.close()
    second = Runtime(store_url, auto_compact=False, policy=immediate_policy(tail_turns=1))
    try:
        add(second, sid, "assistant", "one more", 10)
        assert by_id(second, sid)[tool]["state"] == "aged"
        live = second.explain(sid, tool)
    finally:
        second.close()
    assert rebuild_and_compare(store_url)["identical"]
    again = Runtime(store_url, auto_compact=False, policy=immediate_policy(tail_turns=1))
    try:
        assert again.explain(sid, tool) == live
    finally:
        again.close()


def test_a_branch_keeps_the_pins_of_its_chain(rt: Runtime) -> None:
    """Audit 2: a branch started with no pins, so a pinned tool aged in it."""
    sid = start(rt)
    add(rt, sid, "user", "task")
    add(rt, sid, "assistant", "calling", 1)
    tool = add(rt, sid, "tool", name="grep", output="hit\n" * 20, minute=2)
    rt.execute("pin", sid, tool, at=at(3))
    branch = branch_with_turns(rt, sid, tool, 5)
    kept = by_id(rt, branch)[tool]
    assert (kept["state"], kept["locked"]) == ("full", True)


def test_a_branch_explains_what_its_source_did_before_the_branch_point(rt: Runtime) -> None:
    """Audit 3: the rows inherited from the source were missing."""
    sid = start(rt)
    add(rt, sid, "user", "task")
    add(rt, sid, "assistant", "calling", 1)
    tool = add(rt, sid, "tool", name="grep", output="hit\n" * 20, minute=2)
    for n in range(4):
        last = add(rt, sid, "assistant", f"turn {n}", 3 + n)
    source_rows = rt.explain(sid, tool)["transitions"]
    assert [r["rule"] for r in source_rows] == ["tool_aging"]
    branch = branch_with_turns(rt, sid, last, 1)
    assert rt.explain(branch, tool)["transitions"] == source_rows


def test_an_attach_node_explains_the_items_it_staged(rt: Runtime) -> None:
    """Audit 4: attached copies' rows were filed under the source node only."""
    other = start(rt, "source")
    add(rt, other, "user", "their task")
    add(rt, other, "assistant", "their call", 1)
    their_tool = add(rt, other, "tool", name="cat", output="file\n" * 20, minute=2)
    sid = start(rt)
    add(rt, sid, "user", "mine", 3)
    node, _ = rt.execute("attach", sid, other, at=at(4))
    for n in range(5):
        add(rt, sid, "assistant", f"turn {n}", 5 + n)
    out = rt.explain(sid, str(node))
    staged = {i["item_id"]: i for i in out["staged"]}
    copy = staged[f"{node}:{their_tool}"]
    assert copy["state"] == "aged" and copy["transitions"][0]["rule"] == "tool_aging"
    # another session's node, named by key (its bare id names nothing in this session)
    assert rt.explain(sid, f"{other}/{their_tool}")["current"]["item_id"] == copy["item_id"]


def test_a_pinned_capped_result_stays_capped_when_a_retry_rebuilds_it(rt: Runtime) -> None:
    """Audits 5 and 6: a retry of a sibling call re-derived t1 uncapped, and capped twice."""
    sid = start(rt)
    add(rt, sid, "user", "task")
    add(rt, sid, "assistant", "two calls", 1)
    big = add(rt, sid, "tool", name="cat", input={"f": 1}, output="x" * 9_000, minute=2)
    rt.execute("pin", sid, big, at=at(2))
    other = add(rt, sid, "tool", name="cat", input={"f": 2}, output="y", minute=3)
    capped = by_id(rt, sid)[big]
    assert capped["truncated"]
    rt.execute(
        "add_sibling", sid, of=other, kind="retry", input={"f": 2}, output="y again", at=at(4)
    )
    again = by_id(rt, sid)[big]
    assert again["truncated"] and again["rendered"] == capped["rendered"]
    assert again["locked"]
    rows = rt.explain(sid, big)["transitions"]
    assert [r["rule"] for r in rows] == ["per_item_cap"], "one cap row along the head's line"


def test_the_idle_reason_says_what_it_tests(rt: Runtime) -> None:
    """Audit 7: at exactly 60 minutes the reason read '60.0 min > 60 min'."""
    sid = start(rt)
    add(rt, sid, "user", "task")
    add(rt, sid, "assistant", "calling", 1)
    tool = add(rt, sid, "tool", name="grep", output="hit\n" * 20, minute=1)
    for n in range(4):
        add(rt, sid, "assistant", f"turn {n}", 1)
    add(rt, sid, "assistant", "an hour later", 61)
    assert by_id(rt, sid)[tool]["reason"] == "untouched for 60.0 min ≥ 60 min"


def test_the_budget_counts_the_tools_the_request_lists(rt: Runtime) -> None:
    """Audit 8: summarized tools' definitions were budgeted by the rules but not /budget."""
    sid = start(rt)
    add(rt, sid, "user", "task")
    add(rt, sid, "assistant", "calling", 1)
    add(rt, sid, "tool", name="only_once", output="x", minute=1)
    for n in range(4):
        add(rt, sid, "assistant", f"turn {n}", 2 + n)
    head = rt.head_commit(sid)
    rt.execute("record_summary", sid, [i["item_id"] for i in head["items"][1:4]], "early",
               "test", head["id"], at=at(9))  # fmt: skip
    listed = rt.rendered(sid, "openai")["request"]["tools"]
    assert [t["function"]["name"] for t in listed] == ["only_once"], "still callable"
    from domain.tool_specs import definition_tokens

    assert rt.budget(sid)["tools"] == definition_tokens([{"name": "only_once"}])


class Recording:
    """A summarizer that keeps what it was given."""

    name = "recording"

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    def summarize(self, items: list[dict[str, Any]]) -> str:
        self.seen.append(items)
        return f"summary of {len(items)} items"


def test_a_summary_after_the_guard_reads_what_the_guard_folded(store_url: str) -> None:
    """The guard's extractive fold is a stand-in: an LLM summary reads the originals."""
    summarizer = Recording()
    rt = Runtime(store_url, auto_compact=False, summarizer=summarizer)
    try:
        sid, _ = rt.execute("start_session", "t", "openai:gpt-4o", context_window=2_000,
                            at=at(0))  # fmt: skip
        agent_turns(rt, sid, 30)
        folds = [i for i in visible(rt, sid) if i["item_id"].startswith("fold:")]
        assert folds, "the guard folded while no summarizer ran"
        rt.compact(sid)
        [given] = summarizer.seen
        ids = [i["item_id"] for i in given]
        assert not any(i.startswith("fold:") for i in ids), "read through, not the stand-in"
        assert any(i["role"] == "user" and "question 1:" in i["rendered"] for i in given)
    finally:
        rt.close()
