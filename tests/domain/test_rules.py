"""The context rules, one edge case at a time, on pure domain objects.

Every test builds a ``WorkingContext`` from hand-made ``Item``s and a
``Policy`` and calls the rule functions directly: no database, no clock.
"Now" is always an explicit event time far from the wall clock, so a rule
that peeked at the real time would fail here.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from domain.budget import Budget
from domain.call_ids import call_framing
from domain.context import Item
from domain.item_cost import tokens_of
from domain.pipeline import touch_reads
from domain.policy import Policy
from domain.rules.emergency import emergency_clear
from domain.rules.idle_clearing import PLACEHOLDER, clear_idle
from domain.rules.summarize import fold_summary, summary_request
from domain.rules.tool_aging import age_one, age_tools, cut_args, stub
from domain.rules.truncation import cap_item
from domain.tokens import item_tokens
from domain.working_context import WorkingContext
from projections.records import NodeRow

T0 = datetime(2020, 3, 1, tzinfo=UTC).timestamp()  # years before the wall clock
MIN = 60.0
# One rule at a time: aging and clearing act as soon as they are due (the
# batching that holds them back is tested in test_batching.py).
UNBATCHED = Policy(batch_trigger=0.0, clear_at_least=0)


class Builder:
    """Appends items to a working context the way the projection does."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.ctx = WorkingContext(policy or UNBATCHED)

    def add(self, role: str, text: str = "x", *, at: float = T0, **fields: object) -> Item:
        item_id = str(fields.pop("item_id", f"{role}{len(self.ctx.items)}"))
        call = fields.get("call")
        item = Item(
            item_id=item_id, source_node_id=item_id, role=role, state="full", rendered=text,
            tokens=item_tokens(text, call if isinstance(call, str) else None),
            ord=self.ctx.next_ord(), touched_at=at, **fields,  # type: ignore[arg-type]
        )  # fmt: skip
        self.ctx.add(item)
        return item

    def tool(self, name: str = "read_file", result: str = "a\nb", **fields: object) -> Item:
        fields.setdefault("call", '{"path": "f.py"}')
        return self.add("tool", result, name=name, **fields)

    def turns(self, n: int, at: float = T0) -> list[Item]:
        return [self.add("assistant", f"turn {i}", at=at) for i in range(n)]


def budget(history: int, compact_at: int, emergency_at: int = 10**9) -> Budget:
    return Budget(window=history, system=0, tools=0, output_reserve=0, history=history,
                  compact_at=compact_at, emergency_at=emergency_at)  # fmt: skip


def aged_tool(b: Builder, at: float = T0, **fields: object) -> Item:
    """A tool item the tail boundary has just passed (tail 3, 4 turns since)."""
    b.add("assistant", "calls the tool", at=at)
    tool = b.tool(at=at, **fields)
    b.turns(4, at=at)
    age_tools(b.ctx)
    return tool


# ------------------------------------------------------------------ tool aging


def test_tool_aging_exactly_at_the_tail_boundary() -> None:
    b = Builder()
    b.add("user", "fix it")
    b.add("assistant", "I will read the file")
    tool = b.tool(result="line 1\nline 2\nline 3")
    b.turns(3)
    age_tools(b.ctx)
    assert tool.state == "full", "3 assistant turns since is still inside tail 3"
    assert b.ctx.transitions == []

    b.add("assistant", "the fourth turn")
    age_tools(b.ctx)
    assert tool.state == "aged"
    assert tool.rendered == "[tool result: 3 lines, first: line 1]"
    assert tool.reason == "assistant turns since: 4 > tail 3"
    [t] = b.ctx.transitions
    assert (t.item_id, t.from_state, t.to_state, t.rule) == (tool.item_id, "full", "aged",
                                                             "tool_aging")  # fmt: skip
    assert t.inputs == "assistant turns since: 4 > tail 3"
    assert tool.tokens == tokens_of(tool, b.ctx.policy)
    assert tool.tokens == item_tokens(tool.rendered, tool.call, tool.name) + call_framing(tool)


def test_aging_counts_turns_against_the_policy_tail() -> None:
    b = Builder(Policy(tail_turns=1))
    b.add("assistant")
    tool = b.tool()
    b.turns(1)
    age_tools(b.ctx)
    assert tool.state == "full"
    b.turns(1)
    age_tools(b.ctx)
    assert tool.reason == "assistant turns since: 2 > tail 1"


def test_aged_call_arguments_are_cut_to_200_chars() -> None:
    long_call = "x" * 500
    exact_call = "y" * 200
    b = Builder()
    b.add("assistant")
    long_tool = b.tool(call=long_call)
    exact_tool = b.tool(call=exact_call)
    b.turns(4)
    age_tools(b.ctx)
    assert long_tool.call == "x" * 200 + "… [300 chars cut]"
    assert exact_tool.call == exact_call
    assert cut_args(None, 200) is None
    assert cut_args("z" * 201, 200) == "z" * 200 + "… [1 chars cut]"


@pytest.mark.parametrize(
    ("result", "is_error", "expected"),
    [
        ("", False, "[tool result: empty]"),
        ("  \n\t\n ", False, "[tool result: empty]"),
        ("Traceback: boom\nline 2", True, "[tool error: Traceback: boom]"),
        ("exit 0", False, "[tool result: exit 0]"),
        ("  one line, padded  \n", False, "[tool result: one line, padded]"),
        ("first\nsecond\nthird", False, "[tool result: 3 lines, first: first]"),
        ("q" * 300 + "\nmore", False, f"[tool result: 2 lines, first: {'q' * 120}]"),
    ],
)
def test_stub_forms(result: str, is_error: bool, expected: str) -> None:
    assert stub(result, is_error) == expected


def test_an_aged_error_result_gets_the_error_stub() -> None:
    b = Builder()
    tool = aged_tool(b, is_error=True)
    assert tool.rendered == "[tool error: a]"


def test_protected_tools_never_age() -> None:
    b = Builder()
    b.add("assistant")
    todo = b.tool(name="todo_list", result="1. write tests\n2. fix bugs")
    search = b.tool(name="web_search", result="results")
    plain = b.tool(name="grep", result="hit")
    b.turns(10)
    age_tools(b.ctx)
    assert (todo.state, search.state, plain.state) == ("full", "full", "aged")
    age_one(b.ctx, todo)
    assert todo.state == "full"
    assert todo.rendered == "1. write tests\n2. fix bugs"


def test_policy_decides_which_tools_are_protected() -> None:
    b = Builder(Policy(protected_tools=("grep",)))
    b.add("assistant")
    grep = b.tool(name="grep")
    todo = b.tool(name="todo_list")
    b.turns(4)
    age_tools(b.ctx)
    assert (grep.state, todo.state) == ("full", "aged")


# ---------------------------------------------------------- per-item cap


def test_per_item_cap_cuts_the_middle_and_says_how_much() -> None:
    b = Builder()
    b.add("assistant")
    result = "HEAD" + "m" * 9_992 + "TAIL"
    tool = b.tool(result=result)
    inputs = cap_item(tool, b.ctx.policy)
    assert inputs == "result 10000 chars > cap 4000; cut 6000"
    assert tool.truncated and tool.state == "full", "the cap applies inside the tail window"
    assert tool.rendered.startswith("HEAD" + "m" * 1996 + "\n")
    assert tool.rendered.endswith("\n" + "m" * 1996 + "TAIL")
    assert "[… 6000 chars cut by ctxstore …]" in tool.rendered
    assert tool.tokens == tokens_of(tool, b.ctx.policy)
    assert tool.tokens == item_tokens(tool.rendered, tool.call, tool.name) + call_framing(tool)


def test_per_item_cap_leaves_short_results_and_messages_alone() -> None:
    b = Builder(Policy(result_cap=10))
    b.add("assistant", "a" * 50)
    short = b.tool(result="0123456789")
    assert cap_item(short, b.ctx.policy) is None
    assert cap_item(b.ctx.ordered()[0], b.ctx.policy) is None


def test_a_pinned_result_is_capped_as_it_enters() -> None:
    """The cap is how a node becomes an item: a pin locks the item, not its node's size.

    Before generation 2 a pinned node's result skipped the cap, so a retry that
    re-derived a pinned, capped result brought it back uncapped.
    """
    b = Builder(Policy(result_cap=10))
    locked = b.tool(result="z" * 50, locked=True)
    assert cap_item(locked, b.ctx.policy) == "result 50 chars > cap 10; cut 40"
    assert locked.truncated and len(locked.rendered) < 50


def test_legacy_rules_leave_locked_items_uncapped() -> None:
    b = Builder(Policy(result_cap=10, generation=1))
    b.add("assistant", "a" * 50)
    locked = b.tool(result="z" * 50, locked=True)
    assert cap_item(locked, b.ctx.policy) is None
    assert locked.rendered == "z" * 50 and not locked.truncated


# ------------------------------------------------------------ idle clearing


def test_idle_clearing_at_59_versus_61_minutes_of_event_time() -> None:
    b = Builder()
    tool = aged_tool(b)
    assert tool.state == "aged"
    clear_idle(b.ctx, T0 + 59 * MIN)
    assert tool.state == "aged", "the wall clock is years later; only event time counts"
    clear_idle(b.ctx, T0 + 61 * MIN)
    assert tool.state == "cleared"
    assert tool.rendered == PLACEHOLDER
    t = b.ctx.transitions[-1]
    assert (t.from_state, t.to_state, t.rule) == ("aged", "cleared", "idle_clearing")
    assert t.inputs == "untouched for 61.0 min ≥ 60 min"


def test_only_aged_items_go_idle() -> None:
    b = Builder()
    b.add("assistant")
    full = b.tool()  # inside the tail: never aged, so never idle-cleared
    clear_idle(b.ctx, T0 + 600 * MIN)
    assert full.state == "full"


def test_a_read_restarts_the_idle_clock() -> None:
    b = Builder()
    tool = aged_tool(b)
    reader = NodeRow(
        node_id="reader", session_id="s", seq=99, role="assistant", name=None, input=None,
        output="let me look again", parent=None, edge="root", call_id=None,
        reads=[tool.item_id, "unknown-node"], meta={}, sibling_of=None, version_kind=None,
        created_at=T0 + 50 * MIN, event_id="s:99", notification_id=99,
    )  # fmt: skip
    touch_reads(b.ctx, [reader])
    assert tool.touched_at == T0 + 50 * MIN
    clear_idle(b.ctx, T0 + 61 * MIN)
    assert tool.state == "aged", "read 11 minutes ago"
    clear_idle(b.ctx, T0 + 109 * MIN)
    assert tool.state == "aged"
    clear_idle(b.ctx, T0 + 111 * MIN)
    assert tool.state == "cleared"
    assert b.ctx.transitions[-1].inputs == "untouched for 61.0 min ≥ 60 min"


def test_an_older_read_does_not_turn_the_clock_back() -> None:
    b = Builder()
    tool = aged_tool(b, at=T0 + 30 * MIN)
    b.ctx.touch(tool, T0)
    assert tool.touched_at == T0 + 30 * MIN


# ------------------------------------------------------------- locked items


def test_locked_items_are_untouched_by_every_rule() -> None:
    b = Builder(Policy(result_cap=10))
    b.add("assistant", "calls")
    locked_tool = b.tool(result="r" * 40, locked=True)
    open_tool = b.tool(result="s" * 40)
    b.turns(4)
    locked_aged = aged_tool(b)
    b.ctx.set_locked(locked_aged, True)
    before = (locked_tool.to_json(), locked_aged.to_json())

    age_tools(b.ctx)
    age_one(b.ctx, locked_tool)
    clear_idle(b.ctx, T0 + 1_000 * MIN)
    emergency_clear(b.ctx, budget(history=1, compact_at=0, emergency_at=0))
    request = summary_request(b.ctx, budget(history=0, compact_at=-1))
    assert request is not None
    assert locked_tool.item_id not in request["item_ids"]
    assert locked_aged.item_id not in request["item_ids"]
    fold_summary(b.ctx, "summary:1", [i.item_id for i in b.ctx.ordered()], "gist", "test")

    assert (locked_tool.to_json(), locked_aged.to_json()) == before
    assert open_tool.state == "summarized", "the unlocked neighbour was not spared"
    touched = {t.item_id for t in b.ctx.transitions}
    assert locked_tool.item_id not in touched
    assert locked_aged.item_id in touched, "it aged before it was locked"
    assert [t.to_state for t in b.ctx.transitions if t.item_id == locked_aged.item_id] == ["aged"]
    with pytest.raises(AssertionError, match="locked"):
        b.ctx.set_state(locked_tool, "aged", "tool_aging", "forced")


def test_unpinning_a_passed_tool_ages_it_then() -> None:
    b = Builder()
    b.add("assistant")
    tool = b.tool(locked=True)
    b.turns(4)
    age_tools(b.ctx)
    assert tool.state == "full"
    b.ctx.set_locked(tool, False)
    age_one(b.ctx, tool)
    assert tool.state == "aged"
    assert tool.reason == "assistant turns since: 4 > tail 3"
