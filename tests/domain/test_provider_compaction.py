"""The provider-compaction fold as a property over random commits.

For any commit, a render folds only items before the latest compaction of its
own family, never locked ones, anchors or items already summarized; a fold
only tightens (to ``summarized``); a folded render is exactly the render of
the commit with those items summarized; shapes of another family fold nothing
and render as if no fold existed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.context import tightens
from domain.native_blocks import SHAPE_FAMILY, family
from domain.provider_compaction import folds
from domain.render import SHAPES, render_shape
from tests.domain.test_render import MODEL, commit, item
from tests.domain.test_render_shapes import NATIVE
from tests.shape_checks import CHECKS

COMPACTIONS = [b for b in NATIVE if b["type"] == "compaction"]
ROLE = st.sampled_from(["user", "assistant", "tool", "summary"])
STATE = st.sampled_from(["full", "aged", "cleared", "summarized"])
FAILED = {"type": "compaction", "content": None}  # Anthropic's, when its compaction failed
BLOCKS = st.sampled_from(
    [None, *[[b, {"type": "text", "text": "t"}] for b in [*COMPACTIONS, FAILED]]]
)


def test_a_failed_anthropic_compaction_folds_nothing() -> None:
    def items(block: dict[str, Any]) -> list[Any]:
        last = item(2, "assistant", "a2", blocks=[block, {"type": "text", "text": "t"}])
        return [item(0, "user", "u0", is_anchor=True), item(1, "assistant", "a1"), last]

    assert folds(commit(items(FAILED)), "anthropic") == []
    assert [r["item_id"] for r in folds(commit(items(COMPACTIONS[0])), "anthropic")] == ["i1"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ROLE, STATE, st.booleans(), st.booleans(), BLOCKS),
                min_size=1, max_size=16))  # fmt: skip
def test_a_fold_only_tightens_what_its_compaction_covers(
    specs: list[tuple[str, str, bool, bool, Any]],
) -> None:
    items = []
    for n, (role, state, locked, anchor, blocks) in enumerate(specs):
        state = "summary" if role == "summary" else state
        extra: dict[str, Any] = {"locked": locked, "is_anchor": anchor and role == "user"}
        if role == "assistant" and blocks:
            extra["blocks"] = blocks
        if role == "tool":
            extra["call"] = json.dumps({"n": n})
        items.append(item(n, role, f"{role} {n}", state, **extra))
    c = commit(items)
    by_id = {i.item_id: i for i in items}
    for shape in SHAPES:
        rows = folds(c, shape)
        made_by = SHAPE_FAMILY.get(shape)
        if made_by is None:
            assert rows == [], shape
            continue
        stands = [i for i in items if i.role == "assistant" and i.state != "summarized"
                  and any(family(b) == made_by and b.get("content", "") is not None
                          for b in i.blocks or ())]  # fmt: skip
        for row in rows:
            folded = by_id[row["item_id"]]
            assert stands and folded.ord < stands[-1].ord
            assert not folded.locked and not folded.is_anchor and folded.state != "summarized"
            assert tightens(folded.state, row["to_state"]) and row["to_state"] == "summarized"
            assert row["rule"] == "provider_compaction" and row["inputs"]
        summarized = {r["item_id"] for r in rows}
        same = commit([replace(i, state="summarized") if i.item_id in summarized else i
                       for i in items])  # fmt: skip
        request = render_shape(c, shape, MODEL)
        if shape in CHECKS:
            CHECKS[shape](request)
        assert json.dumps(request) == json.dumps(render_shape(same, shape, MODEL))
