"""The budget-driven rules: summary requests, folding, emergency clearing.

Pure domain objects only (see ``test_rules.py`` for the builder).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.budget import Budget
from domain.context import Item
from domain.policy import Policy
from domain.rules.emergency import emergency_clear
from domain.rules.summarize import (
    as_range,
    fold_summary,
    foldable,
    summary_request,
    with_item_ids,
    worth_folding,
)
from domain.working_context import WorkingContext
from tests.domain.test_rules import T0, Builder, aged_tool, budget

KEY = "source-session:source-head"


def ids(request: dict[str, object] | None) -> list[str]:
    assert request is not None
    return list(request["item_ids"])  # type: ignore[call-overload]


def conversation(b: Builder) -> dict[str, str]:
    """system, first user, A1, T1, pinned user, A2, T2, then a 3-turn tail."""
    names = {}
    names["system"] = b.add("system", "be helpful", is_anchor=True).item_id
    names["user"] = b.add("user", "the task", is_anchor=True).item_id
    names["a1"] = b.add("assistant", "first step").item_id
    names["t1"] = b.tool(result="out 1").item_id
    names["pinned"] = b.add("user", "remember this", locked=True).item_id
    names["a2"] = b.add("assistant", "second step").item_id
    names["t2"] = b.tool(result="out 2").item_id
    names["tail"] = b.turns(3)[0].item_id
    return names


# ------------------------------------------------------------ summary request


def test_summary_request_takes_the_oldest_run_and_skips_anchors_and_pins() -> None:
    b = Builder()
    n = conversation(b)
    used = b.ctx.total_tokens - b.ctx.system_tokens
    request = summary_request(b.ctx, budget(history=0, compact_at=-1))
    run = [n["a1"], n["t1"], n["a2"], n["t2"]]
    assert ids(request) == run, "anchors skipped, the pinned user stepped over"
    assert request is not None
    assert request["tokens"] == sum(b.ctx.items[i].tokens for i in run)
    assert request["reason"] == f"history {used} tokens > compact at -1 (92% of 0)"
    assert with_item_ids(as_range(request), b.ctx.items.values()) == request


def test_legacy_requests_end_at_a_pin() -> None:
    b = Builder(Policy(generation=1))
    n = conversation(b)
    request = summary_request(b.ctx, budget(history=0, compact_at=-1))
    assert ids(request) == [n["a1"], n["t1"]], "before generation 2 the pinned user ended it"


def test_summary_request_stops_once_enough_is_folded() -> None:
    b = Builder(Policy(summary_target=0.5, batch_trigger=0.0, clear_at_least=0))
    n = conversation(b)
    used = b.ctx.total_tokens - b.ctx.system_tokens
    # target = history * 0.5; need = used - target is tiny: the first unit is enough
    request = summary_request(b.ctx, budget(history=2 * used - 2, compact_at=0))
    assert ids(request) == [n["a1"]]


def test_no_summary_request_under_the_threshold_or_without_a_full_tail() -> None:
    b = Builder()
    conversation(b)
    used = b.ctx.total_tokens - b.ctx.system_tokens
    assert summary_request(b.ctx, budget(history=10 * used, compact_at=used)) is None
    short = Builder()
    short.add("user", "task", is_anchor=True)
    short.add("assistant", "a")
    short.tool()
    short.add("assistant", "b")
    assert summary_request(short.ctx, budget(history=0, compact_at=-1)) is None


def test_the_tail_window_is_never_folded() -> None:
    b = Builder()
    b.add("user", "task", is_anchor=True)
    tail = b.turns(3)
    assert summary_request(b.ctx, budget(history=0, compact_at=-1)) is None
    b.add("assistant", "a fourth turn")
    assert ids(summary_request(b.ctx, budget(history=0, compact_at=-1))) == [tail[0].item_id]


def attach_block(b: Builder, **copy_fields: object) -> list[str]:
    block = [
        b.add("marker", "[Attached context]", attached_from=KEY),
        b.add("user", "their question", attached_from=KEY, **copy_fields),
        b.add("assistant", "their answer", attached_from=KEY),
        b.add("marker", "[End of attached context]", attached_from=KEY),
    ]
    return [item.item_id for item in block]


def test_an_attach_block_folds_whole() -> None:
    b = Builder()
    b.add("user", "task", is_anchor=True)
    block = attach_block(b)
    a1 = b.add("assistant", "after the attach").item_id
    b.turns(3)
    assert ids(summary_request(b.ctx, budget(history=0, compact_at=-1))) == block + [a1]


def test_an_attach_block_with_one_pinned_item_is_skipped_whole() -> None:
    b = Builder()
    b.add("user", "task", is_anchor=True)
    attach_block(b, locked=True)
    a1 = b.add("assistant", "after the attach").item_id
    b.turns(3)
    assert ids(summary_request(b.ctx, budget(history=0, compact_at=-1))) == [a1]


def test_an_attach_block_reaching_into_the_tail_is_left_whole() -> None:
    b = Builder()
    b.add("user", "task", is_anchor=True)
    a1 = b.add("assistant", "before the attach").item_id
    attach_block(b)  # its assistant copy is the third-last assistant turn
    b.turns(2)
    assert ids(summary_request(b.ctx, budget(history=0, compact_at=-1))) == [a1]


def test_fold_summary_takes_a_block_whole_or_not_at_all() -> None:
    b = Builder()
    b.add("user", "task", is_anchor=True)
    block = attach_block(b)
    a1 = b.add("assistant", "after").item_id
    b.turns(3)
    summary = fold_summary(b.ctx, "summary:half", block[:2] + [a1], "gist", "test")
    assert summary is not None
    assert [b.ctx.items[i].state for i in block] == ["full"] * 4
    assert b.ctx.items[a1].state == "summarized"
    assert fold_summary(b.ctx, "summary:none", block[:3], "gist", "test") is None


# ------------------------------------------------------------------ folding


def test_fold_summary_folds_the_run_and_sits_after_it() -> None:
    b = Builder()
    n = conversation(b)
    before = b.ctx.total_tokens
    run = [n["a1"], n["t1"]]
    covered_tokens = sum(b.ctx.items[i].tokens for i in run)
    summary = fold_summary(b.ctx, "summary:1", run + [n["pinned"], "gone"], "did A", "extractive")
    assert summary is not None
    assert summary.role == summary.state == "summary"
    assert summary.rendered == "[Summary] did A"
    assert summary.ord == b.ctx.items[n["t1"]].ord + 1, "just after its run: folds nest in place"
    assert summary.level == 1
    order = [i.item_id for i in b.ctx.ordered()]
    assert order.index("summary:1") == order.index(n["t1"]) + 1
    assert order.index("summary:1") < order.index(n["pinned"])
    for item_id in run:
        item = b.ctx.items[item_id]
        assert (item.state, item.merged_into) == ("summarized", "summary:1")
    assert b.ctx.items[n["pinned"]].state == "full", "locked items are never folded"
    assert b.ctx.total_tokens == before - covered_tokens + summary.tokens
    assert b.ctx.assistant_ords[0] == b.ctx.items[n["a2"]].ord, "A1 no longer counts as a turn"
    rules = {(t.item_id, t.rule, t.to_state) for t in b.ctx.transitions}
    assert rules == {(i, "summarize", "summarized") for i in run}
    assert all(t.inputs == "folded into summary:1 by extractive" for t in b.ctx.transitions)


def test_the_next_run_folds_the_earlier_summary_again() -> None:
    """Summaries nest: a long session's summaries cannot pile up past the window."""
    b = Builder()
    n = conversation(b)
    fold_summary(b.ctx, "summary:1", [n["a1"], n["t1"]], "did A", "extractive")
    b.ctx.set_locked(b.ctx.items[n["pinned"]], False)
    request = summary_request(b.ctx, budget(history=0, compact_at=-1))
    assert ids(request) == ["summary:1", n["pinned"], n["a2"], n["t2"]]
    top = fold_summary(b.ctx, "summary:2", ids(request), "did A and B", "extractive")
    assert top is not None and top.level == 2
    assert b.ctx.items["summary:1"].state == "summarized"
    assert b.ctx.items["summary:1"].merged_into == "summary:2"


def test_a_lone_summary_is_never_folded_on_its_own() -> None:
    b = Builder()
    n = conversation(b)
    fold_summary(b.ctx, "summary:1", [n["a1"], n["t1"]], "did A", "extractive")
    request = summary_request(b.ctx, budget(history=0, compact_at=-1))
    assert ids(request) == ["summary:1", n["a2"], n["t2"]], "it folds again across the pin"
    assert fold_summary(b.ctx, "summary:2", ["summary:1"], "again", "x") is None


def test_legacy_rules_never_fold_a_summary_again() -> None:
    b = Builder(Policy(generation=1))
    n = conversation(b)
    summary = fold_summary(b.ctx, "summary:1", [n["a1"], n["t1"]], "did A", "extractive")
    assert summary is not None and summary.ord == b.ctx.items[n["a1"]].ord - 1
    b.ctx.set_locked(b.ctx.items[n["pinned"]], False)
    request = summary_request(b.ctx, budget(history=0, compact_at=-1))
    assert ids(request) == [n["pinned"], n["a2"], n["t2"]], "summaries are never re-folded"


# ---------------------------------------------------------------- emergency


def split_at(share: float, used: int, system: int, policy: Policy) -> Budget:
    """The smallest window whose history budget is at most ``used / share``."""
    window = used
    while True:
        split = Budget.split(window, system, 0, policy)
        if split.history and used / split.history <= share:
            return split
        window += 1


def emergency_fixture() -> tuple[Builder, list[str], list[str]]:
    b = Builder()
    b.add("system", "be helpful", is_anchor=True)
    b.add("user", "task " * 40, is_anchor=True)
    aged = [aged_tool(b).item_id, aged_tool(b, is_error=True).item_id]
    full = [i.item_id for i in b.ctx.ordered() if i.state == "full"]
    return b, aged, full


def test_emergency_clearing_over_95_percent() -> None:
    b, aged, full = emergency_fixture()
    used = b.ctx.total_tokens - b.ctx.system_tokens
    split = split_at(0.96, used, b.ctx.system_tokens, b.ctx.policy)
    assert split.status(used) == "emergency"
    emergency_clear(b.ctx, split)
    assert [b.ctx.items[i].state for i in aged] == ["cleared", "cleared"]
    assert all(b.ctx.items[i].state == "full" for i in full), "only aged items are cleared"
    assert [(t.rule, t.inputs) for t in b.ctx.transitions if t.to_state == "cleared"] == [
        ("emergency_clearing", f"history {used} tokens > emergency {split.emergency_at}")
    ] * 2


def test_no_emergency_clearing_at_94_percent() -> None:
    b, aged, _ = emergency_fixture()
    used = b.ctx.total_tokens - b.ctx.system_tokens
    split = split_at(0.94, used, b.ctx.system_tokens, b.ctx.policy)
    assert split.status(used) == "compact"
    emergency_clear(b.ctx, split)
    assert [b.ctx.items[i].state for i in aged] == ["aged", "aged"]


def test_emergency_spares_locked_aged_items() -> None:
    b, aged, _ = emergency_fixture()
    b.ctx.set_locked(b.ctx.items[aged[0]], True)
    emergency_clear(b.ctx, budget(history=1, compact_at=0, emergency_at=0))
    assert [b.ctx.items[i].state for i in aged] == ["aged", "cleared"]
    assert b.ctx.items[aged[0]].touched_at == T0


# ------------------------------------------- summary request: reference model


def reference_request(ctx: WorkingContext, budget: Budget) -> list[str] | None:
    """The rule as first written (plain units of items): the spec the fast scan must meet."""
    used = ctx.total_tokens - ctx.system_tokens
    tail = ctx.policy.tail_turns
    if used <= budget.compact_at or len(ctx.assistant_ords) < tail:
        return None
    tail_start = ctx.assistant_ords[-tail] if tail else None
    need = used - int(budget.history * ctx.policy.summary_target)
    if ctx.policy.summary_max_tokens is not None:
        need = min(need, ctx.policy.summary_max_tokens)
    units: list[list[Item]] = []
    for item in ctx.ordered():
        if item.state == "summarized":
            continue
        if item.attached_from and units and units[-1][0].attached_from == item.attached_from:
            units[-1].append(item)
        else:
            units.append([item])
    run: list[Item] = []
    for unit in units:
        if tail_start is not None and unit[-1].ord >= tail_start:
            break
        if all(foldable(i, ctx) for i in unit):
            run.extend(unit)
            if sum(i.tokens for i in run) >= need and worth_folding(run):
                break
        elif ctx.policy.generation < 2 and run:
            break  # generation 2 steps over what cannot fold; before, a run ended there
    return [i.item_id for i in run] if worth_folding(run) else None


entries = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "assistant", "tool", "system", "summary"]),
        st.sampled_from(["full", "full", "aged", "cleared", "summarized"]),
        st.booleans(), st.booleans(), st.sampled_from([None, None, "k1", "k2"]),
        st.integers(1, 50),
    ),
    max_size=30,
)  # fmt: skip


@given(entries=entries, history=st.integers(0, 800), tail=st.integers(0, 4),
       cap=st.one_of(st.none(), st.integers(1, 300)))  # fmt: skip
def test_summary_request_matches_the_reference_rule(
    entries: list[tuple[str, str, bool, bool, str | None, int]],
    history: int,
    tail: int,
    cap: int | None,
) -> None:
    ctx = WorkingContext(Policy(tail_turns=tail, summary_max_tokens=cap))
    for n, (role, state, locked, anchor, block, tokens) in enumerate(entries):
        state = "summary" if role == "summary" else state
        ctx.add(Item(f"i{n}", f"i{n}", role, state, "x", tokens, ctx.next_ord(), T0,
                     locked=locked, is_anchor=anchor, attached_from=block))  # fmt: skip
    limits = budget(history=history, compact_at=-1)
    request = summary_request(ctx, limits)
    assert (ids(request) if request else None) == reference_request(ctx, limits)
    if request is not None:  # the stored form (the run's two ends) names the same run
        assert with_item_ids(as_range(request), ctx.items.values()) == request


def steps_then_tail(steps: int, policy: Policy | None = None) -> tuple[Builder, list[Item]]:
    """Anchors, ``steps`` foldable assistant items, then a full tail window."""
    b = Builder(policy)
    b.add("system", "be helpful", is_anchor=True)
    b.add("user", "the task", is_anchor=True)
    chunk = [b.add("assistant", f"step {n} " * 4) for n in range(steps)]
    b.turns(3)
    return b, chunk


def test_a_stored_range_that_no_longer_fits_the_items_is_refused() -> None:
    b, steps = steps_then_tail(6)
    request = summary_request(b.ctx, budget(history=0, compact_at=-1))
    assert request is not None
    stored = as_range(request)
    assert set(stored) == {"first_item", "last_item", "item_count", "tokens", "reason"}
    b.ctx.remove(steps[1].item_id)
    with pytest.raises(LookupError, match="names 6 items, the commit has 5"):
        with_item_ids(stored, b.ctx.items.values())
    legacy = {"item_ids": ["a", "b"], "tokens": 3, "reason": "r"}  # rows from before the range
    assert with_item_ids(legacy, []) == legacy


def test_one_request_covers_at_most_summary_max_tokens() -> None:
    """Far over the threshold, a request is one chunk; the next starts after its summary."""
    b, chunk = steps_then_tail(40, Policy(summary_max_tokens=30))
    request = summary_request(b.ctx, budget(history=0, compact_at=-1))
    assert request is not None
    covered = ids(request)
    assert covered == [i.item_id for i in chunk[: len(covered)]], "the oldest run"
    assert 30 <= request["tokens"] < 30 + chunk[0].tokens
    fold_summary(b.ctx, "s1", covered, "first chunk", "test")
    after = ids(summary_request(b.ctx, budget(history=0, compact_at=-1)))
    assert after[:2] == ["s1", chunk[len(covered)].item_id], "the summary, then the next chunk"
    unbounded = Builder(Policy(summary_max_tokens=None))
    for item in chunk:
        unbounded.add("assistant", item.rendered)
    unbounded.turns(3)
    assert len(ids(summary_request(unbounded.ctx, budget(history=0, compact_at=-1)))) == 40


# A commit's life as the builder drives it: changes, then the rules, then
# ``changed`` cleared.  The scan memo must never make an answer differ from a
# fresh scan's, whatever the changes were.
operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "tighten", "lock", "unlock", "retoken", "remove",
                         "fold", "policy"]),
        st.integers(0, 10**6), st.sampled_from(["user", "assistant", "assistant", "tool"]),
        st.integers(1, 60), st.sampled_from([None, None, None, "k1"]),
    ),
    min_size=1, max_size=60,
)  # fmt: skip


@given(operations=operations, history=st.integers(0, 600), cap=st.integers(1, 200))
def test_a_reused_scan_answers_as_a_fresh_one_would(
    operations: list[tuple[str, int, str, int, str | None]], history: int, cap: int
) -> None:
    policies = [Policy(tail_turns=2, summary_max_tokens=cap), Policy(tail_turns=1)]
    ctx = WorkingContext(policies[0])
    ctx.add(Item("sys", "sys", "system", "full", "x", 5, ctx.next_ord(), T0, is_anchor=True))
    limits = budget(history=history, compact_at=-1)
    for step, (op, pick, role, tokens, block) in enumerate(operations):
        chosen = sorted(ctx.items.values(), key=lambda i: i.ord)
        item = chosen[pick % len(chosen)]
        if op == "add":
            ctx.add(Item(f"i{step}", f"i{step}", role, "full", "x", tokens, ctx.next_ord(), T0,
                         attached_from=block))  # fmt: skip
        elif op == "tighten" and not item.locked and item.state in ("full", "aged"):
            ctx.set_state(item, "aged" if item.state == "full" else "cleared", "test", "")
        elif op in ("lock", "unlock") and item.state != "summary":
            ctx.set_locked(item, op == "lock")
        elif op == "retoken":
            ctx.retoken(item, tokens)
        elif op == "remove" and item.item_id != "sys":
            ctx.remove(item.item_id)
        elif op == "fold":
            fold_summary(ctx, f"s{step}", [i.item_id for i in chosen[: pick % 5 + 1]], "t", "x")
        elif op == "policy":
            ctx.policy = policies[pick % 2]
        request = summary_request(ctx, limits)
        assert (ids(request) if request else None) == reference_request(ctx, limits)
        ctx.changed.clear()
        ctx.removed.clear()
        ctx.transitions.clear()
