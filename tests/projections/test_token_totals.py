"""A commit's total_tokens is the sum of what its visible items cost, however it was built."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from domain.node_text import node_texts
from domain.pipeline import node_item as pipeline_node_item
from domain.tokens import ENCODING, count_tokens, node_token_counts
from projections import item_rows
from projections.records import NodeRow
from service.runtime import Runtime

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def visible_sum(commit: dict) -> int:  # type: ignore[type-arg]
    return sum(i["tokens"] for i in commit["items"] if i["state"] != "summarized")


def test_a_capped_result_counts_at_its_capped_size(rt: Runtime) -> None:
    sid, _ = rt.execute("start_session", "t", at=T0)
    rt.execute("append_node", sid, role="user", input="go", at=T0)
    caller, _ = rt.execute("append_node", sid, role="assistant", output="read", at=T0)
    rt.execute("append_node", sid, role="tool", name="read_file", input={"p": "x"},
               output="word " * 5_000, at=T0 + timedelta(minutes=1))  # fmt: skip
    live = rt.head_commit(sid)
    assert any(i["truncated"] for i in live["items"])
    assert live["total_tokens"] == visible_sum(live)
    # A retry builds from the parent's stored items: the same totals either way.
    rt.execute(
        "add_sibling", sid, of=caller, kind="retry", output="read", at=T0 + timedelta(minutes=2)
    )
    rt.execute("checkout", sid, caller, at=T0 + timedelta(minutes=3))
    for row in rt.timeline(sid):
        commit = rt.commit(sid, row["commit_id"])
        assert commit["total_tokens"] == visible_sum(commit)


def _node(role: str, counts: dict | None, **content: object) -> NodeRow:  # type: ignore[type-arg]
    return NodeRow("n", "s", 1, role, content.get("name"), content.get("input"),  # type: ignore[arg-type]
                   content.get("output"), None, "root", None, [], {}, None, None, 0.0, "e", 1,
                   counts)  # fmt: skip


def node_item(node: Any, ord_: int, pinned: bool, first_user: bool) -> Any:
    return pipeline_node_item(node, item_rows.node_texts(node), ord_, pinned, first_user)


def test_recorded_counts_equal_what_the_tokenizer_says() -> None:
    """So a rebuild that reads them builds the commits a recount would."""
    cases = [("tool", {"name": "grep", "input": {"q": "x"}, "output": "a\nb " * 300}),
             ("user", {"input": "hello there"}), ("assistant", {"output": {"k": [1, 2]}}),
             ("tool", {"name": "grep", "input": None, "output": None})]  # fmt: skip
    for role, content in cases:
        counts = node_token_counts(*node_texts(role, content.get("input"), content.get("output")))
        recorded = node_item(_node(role, counts, **content), 1024, False, False)
        counted = node_item(_node(role, None, **content), 1024, False, False)
        assert recorded.tokens == counted.tokens, role


def test_the_projection_takes_counts_from_the_log_under_its_own_encoding() -> None:
    forged = {"encoding": ENCODING, "text": 1000, "call": 0}
    assert node_item(_node("user", forged, input="hi"), 1024, False, True).tokens == 1004
    other = dict(forged, encoding="some_other_encoding")
    assert node_item(_node("user", other, input="hi"), 1024, False, True).tokens == (
        4 + count_tokens("hi")
    ), "counts made under another encoding are recounted"
