"""Cache-aware batching, dedup of repeated results, and the window guard, rule by rule.

Pure domain objects (the builder of ``test_rules.py``); ``now`` is explicit.
"""

from __future__ import annotations

from domain.budget import Budget
from domain.context import Item
from domain.pipeline import sync_pins
from domain.policy import Policy
from domain.rules.batching import run_batched_rules
from domain.rules.dedup import dedup_result
from domain.rules.window_guard import guard_window
from domain.working_context import WorkingContext
from tests.domain.test_rules import MIN, T0, Builder

BATCHED = Policy(batch_trigger=0.5, clear_at_least=200)


def limits(history: int, compact: float = 0.85) -> Budget:
    return Budget(window=history, system=0, tools=0, output_reserve=0, history=history,
                  compact_at=int(history * compact), emergency_at=history * 10)  # fmt: skip


def passed_tool(b: Builder, lines: int = 30) -> Item:
    b.add("assistant", "calls the tool")
    tool = b.tool(result="output line\n" * lines)
    b.turns(4)
    return tool


def settle(ctx: WorkingContext) -> None:
    """What the projection does between commits."""
    ctx.changed.clear()
    ctx.removed.clear()
    ctx.transitions.clear()
    ctx.end_step()


def test_aging_waits_until_history_passes_the_trigger_and_frees_enough() -> None:
    b = Builder(BATCHED)
    tool = passed_tool(b, lines=200)
    settle(b.ctx)
    used = b.ctx.total_tokens
    run_batched_rules(b.ctx, limits(history=used * 4), T0)
    assert tool.state == "full", "history at 25% of its budget: under the trigger"
    assert tool.item_id in b.ctx.pending_aging
    run_batched_rules(b.ctx, limits(history=int(used * 1.5)), T0)
    assert tool.state == "aged", "over the trigger, and it frees more than clear_at_least"
    [row] = b.ctx.transitions
    assert "batch: frees" in row.inputs and ">= 200" in row.inputs


def test_a_small_batch_waits_even_over_the_trigger() -> None:
    b = Builder(BATCHED)
    tool = passed_tool(b, lines=1)  # ages to a stub that frees ~nothing
    settle(b.ctx)
    run_batched_rules(b.ctx, limits(history=int(b.ctx.total_tokens * 1.5)), T0)
    assert tool.state == "full"


def test_waiting_work_runs_when_the_prefix_changes_anyway() -> None:
    b = Builder(BATCHED)
    tool = passed_tool(b)
    settle(b.ctx)
    first = b.ctx.ordered()[0]
    b.ctx.rewrite(first, "calls the tool (reworded)", None)  # as a merge or a retry would
    run_batched_rules(b.ctx, limits(history=b.ctx.total_tokens * 10), T0)
    assert tool.state == "aged"
    assert "prefix changes in this commit anyway" in b.ctx.transitions[-1].inputs


def test_pressure_runs_the_batch_whatever_it_frees() -> None:
    b = Builder(BATCHED)
    tool = passed_tool(b, lines=1)
    settle(b.ctx)
    run_batched_rules(b.ctx, limits(history=b.ctx.total_tokens, compact=0.5), T0)
    assert tool.state == "aged"
    assert "> compact at" in b.ctx.transitions[-1].inputs


def test_idle_items_wait_for_a_batch_then_clear_with_it() -> None:
    b = Builder(Policy(batch_trigger=0.5, clear_at_least=10_000))
    old = passed_tool(b)
    settle(b.ctx)
    run_batched_rules(b.ctx, limits(history=b.ctx.total_tokens, compact=0.5), T0)
    assert old.state == "aged"
    settle(b.ctx)
    newer = passed_tool(b)
    settle(b.ctx)
    later = T0 + 120 * MIN
    run_batched_rules(b.ctx, limits(history=b.ctx.total_tokens * 10), later)
    assert (old.state, newer.state) == ("aged", "full"), "neither frees 10,000 tokens"
    run_batched_rules(b.ctx, limits(history=b.ctx.total_tokens, compact=0.5), later)
    assert (old.state, newer.state) == ("cleared", "aged")


def test_frozen_items_wait_for_the_next_commit() -> None:
    b = Builder(BATCHED)
    tool = passed_tool(b)
    settle(b.ctx)
    b.ctx.frozen.add(tool.item_id)
    run_batched_rules(b.ctx, limits(history=b.ctx.total_tokens, compact=0.5), T0)
    assert tool.state == "full"
    settle(b.ctx)
    run_batched_rules(b.ctx, limits(history=b.ctx.total_tokens, compact=0.5), T0)
    assert tool.state == "aged"


# ------------------------------------------------------------------ dedup


def test_a_repeated_result_refers_to_the_first_until_the_first_ages() -> None:
    b = Builder(Policy(batch_trigger=0.0, clear_at_least=0))
    b.add("assistant", "reads twice")
    first = b.tool(result="same file\n" * 40)
    again = b.tool(result="same file\n" * 40)
    dedup_result(b.ctx, again)
    assert again.dedup_of == first.item_id and again.rendered.startswith("[same result as")
    assert again.tokens < first.tokens
    [row] = [t for t in b.ctx.transitions if t.rule == "dedup"]
    assert row.item_id == again.item_id and first.item_id in row.inputs
    b.ctx.rewrite(first, "[tool result: stub]", first.call)  # aging the first
    assert again.rendered == first_text(again) and again.dedup_of is None
    assert [t.rule for t in b.ctx.transitions].count("dedup") == 2


def first_text(item: Item) -> str:
    return "same file\n" * 40


def test_when_the_first_copy_ages_the_next_full_copy_is_referred_to() -> None:
    """Warm and cold contexts must pick the same original (a cold one indexes all copies)."""
    b = Builder(Policy(batch_trigger=0.0, clear_at_least=0))
    b.add("assistant", "reads three times")
    first = b.tool(result="same file\n" * 40)
    second = b.tool(result="same file\n" * 40)
    b.ctx.set_locked(second, True)  # pinned as it came: no reference, a second full copy
    b.ctx.rewrite(first, "[tool result: stub]", first.call)  # aging the first
    third = b.tool(result="same file\n" * 40)
    dedup_result(b.ctx, third)
    assert third.dedup_of == second.item_id
    cold = WorkingContext.from_items(b.ctx.policy, [i.copy() for i in b.ctx.ordered()])
    assert cold.result_holder(second) == b.ctx.result_holder(second) == second.item_id


def test_a_pin_keeps_the_result_not_the_reference() -> None:
    b = Builder(Policy(batch_trigger=0.0, clear_at_least=0))
    b.add("assistant", "reads twice")
    first = b.tool(result="same file\n" * 40)
    again = b.tool(result="same file\n" * 40)
    dedup_result(b.ctx, again)
    sync_pins(b.ctx, {again.item_id})
    assert again.locked and again.dedup_of is None and again.rendered == first_text(again)
    assert b.ctx.transitions[-1].rule == "pin"
    b.ctx.rewrite(first, "[tool result: stub]", first.call)  # aging the first
    assert again.rendered == first_text(again)  # the pinned item is not touched


def test_short_results_and_a_switched_off_policy_are_left_alone() -> None:
    b = Builder(Policy(dedup_tool_results=False))
    b.add("assistant", "reads twice")
    b.tool(result="same file\n" * 40)
    again = b.tool(result="same file\n" * 40)
    dedup_result(b.ctx, again)
    assert again.dedup_of is None
    short = Builder()
    short.add("assistant", "x")
    short.tool(result="ok")
    tiny = short.tool(result="ok")
    dedup_result(short.ctx, tiny)
    assert tiny.dedup_of is None, "a reference would not be shorter"


# ------------------------------------------------------------ window guard


def test_the_guard_folds_the_oldest_first_down_to_the_target() -> None:
    b = Builder(Policy(batch_trigger=0.0, clear_at_least=0, tail_turns=1))
    b.ctx.step_key = "commit1"
    b.add("system", "be brief", is_anchor=True)
    b.add("user", "the task", is_anchor=True)
    old = [b.add("assistant", f"step {n} " * 40) for n in range(10)]
    tail = b.turns(2)
    total = b.ctx.total_tokens
    budget = Budget(window=total // 2, system=b.ctx.system_tokens, tools=0, output_reserve=0,
                    history=total // 2, compact_at=total, emergency_at=total)  # fmt: skip
    assert guard_window(b.ctx, budget) is None, "it fits once folded"
    assert b.ctx.total_tokens <= total // 2
    assert all(i.state == "summarized" for i in old[:5])
    assert all(i.state == "full" for i in tail)
    summary = next(i for i in b.ctx.ordered() if i.state == "summary")
    assert summary.item_id == "fold:commit1:1"
    rows = [t for t in b.ctx.transitions if t.rule == "window_guard"]
    assert rows and "request" in rows[0].inputs and "> limit" in rows[0].inputs


def test_the_guard_says_what_it_could_not_fold() -> None:
    b = Builder(Policy(batch_trigger=0.0, clear_at_least=0))
    b.add("system", "rules " * 300, is_anchor=True)
    b.add("user", "kept " * 300, locked=True)
    b.add("user", "hello")
    budget = Budget(window=100, system=b.ctx.system_tokens, tools=0, output_reserve=0,
                    history=0, compact_at=0, emergency_at=0)  # fmt: skip
    over = guard_window(b.ctx, budget)
    assert over is not None and over["over_window"]
    assert over["shortfall"] == b.ctx.total_tokens - 100
    assert over["pinned"] > 0 and over["system"] == b.ctx.system_tokens
    assert over["other"] == 0, "the unpinned message was folded away"


def test_a_summary_is_cut_to_the_room_pins_leave() -> None:
    """Over the window with pins that fit alone: the last summary gives way, not the promise."""
    b = Builder(Policy(batch_trigger=0.0, clear_at_least=0))
    b.add("user", "kept " * 300, locked=True)
    for n in range(30):
        b.add("user", f"question {n}: " + "why " * 40)
        b.add("assistant", f"answer {n}: " + "because " * 40)
    pinned = next(i for i in b.ctx.ordered() if i.locked).tokens
    limit = pinned + 60  # room for a short summary, not for a full one
    budget = Budget(window=limit, system=0, tools=0, output_reserve=0, history=limit,
                    compact_at=limit, emergency_at=limit)  # fmt: skip
    assert guard_window(b.ctx, budget) is None
    assert b.ctx.total_tokens <= limit
    [summary] = [i for i in b.ctx.iter_visible() if i.state == "summary"]
    assert summary.rendered.startswith("[Summary] Summary of")
