"""A provider's compaction item folds the items before it, in that provider's renders only.

Anthropic's ``compaction`` block and OpenAI's ``compaction`` item stand for
the conversation before them (``domain.provider_compaction``).  A render for
the family that made the latest one leaves those items out, audited in the
answer's ``folded`` rows; every other shape renders them as the rules left
them.  Locked items and anchors stay; the commit itself does not change, so
rebuilding gives the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.projections.test_context_commit import add, start
from tests.projections.test_drop_in_requests import openai_ok
from tests.projections.test_shape_requests import A_COMPACTION, O_COMPACTION, beta_anthropic_ok
from tests.shape_checks import bedrock_ok, gemini_ok, responses_ok


def texts(request: dict[str, Any]) -> str:
    return json.dumps(request)


def test_a_compaction_folds_what_it_covers_for_its_own_family(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy(keep_thinking_turns=None))
    try:
        sid = start(rt, model="anthropic:claude-sonnet-4")
        add(rt, sid, "system", "Be careful.")
        add(rt, sid, "user", "Fix the lexer.", node_id="u1")
        add(rt, sid, "assistant", "Reading lex.py.", 1, node_id="a0")
        add(rt, sid, "tool", name="read_file", input={"path": "lex.py"}, output="def lex()",
            call_id="toolu_01", minute=2, node_id="t1")  # fmt: skip
        add(rt, sid, "user", "Keep the tests green.", 3, node_id="u2")
        rt.execute("pin", sid, "u2")
        add(rt, sid, "assistant", [A_COMPACTION, {"type": "text", "text": "Fixed it."}], 4,
            node_id="a1")  # fmt: skip
        add(rt, sid, "user", "Thanks.", 5, node_id="u3")
        before = rt.head_commit(sid)

        answer = rt.rendered(sid, "anthropic")
        beta_anthropic_ok(answer["request"])
        assert [(r["item_id"], r["from_state"], r["to_state"], r["rule"])
                for r in answer["folded"]] == [
            ("a0", "full", "summarized", "provider_compaction"),
            ("t1", "full", "summarized", "provider_compaction")]  # fmt: skip
        assert "a1" in answer["folded"][0]["inputs"]
        request = texts(answer["request"])
        assert "Reading lex.py" not in request and "def lex()" not in request
        assert "read_file" not in [b.get("name") for m in answer["request"]["messages"]
                                   for b in m["content"]]  # no orphan call  # fmt: skip
        for kept in ("Fix the lexer.", "Keep the tests green.", "Fixed it.", "Thanks."):
            assert kept in request, "anchor, locked, the compaction's own turn and after"
        assert json.dumps(A_COMPACTION) in request, "the compaction stands for them"
        assert answer["request"]["system"] == "Be careful."

        for shape, ok in (("openai", openai_ok), ("responses", responses_ok),
                          ("gemini", gemini_ok), ("bedrock", bedrock_ok)):  # fmt: skip
            other = rt.rendered(sid, shape)
            ok(other["request"])
            assert other["folded"] == [], shape
            assert "Reading lex.py" in texts(other["request"]), shape
            assert "def lex()" in texts(other["request"]), shape
        assert rt.head_commit(sid) == before, "the commit is the same for every shape"
        assert rebuild_and_compare(store_url)["identical"]
    finally:
        rt.close()


def test_an_openai_compaction_folds_only_responses_renders(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy(keep_thinking_turns=None))
    try:
        sid = start(rt, model="openai:gpt-5")
        add(rt, sid, "user", "Fix the lexer.", node_id="u1")
        add(rt, sid, "assistant", "Looking.", 1, node_id="a0")
        add(rt, sid, "user", "And the parser.", 2, node_id="u2")
        add(rt, sid, "assistant", [O_COMPACTION, {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "Both fixed.", "annotations": []}]}],
            3, node_id="a1")  # fmt: skip
        add(rt, sid, "user", "Ship it.", 4, node_id="u3")
        responses = rt.rendered(sid, "responses")
        responses_ok(responses["request"])
        assert [r["item_id"] for r in responses["folded"]] == ["a0", "u2"]
        kinds = [i["type"] for i in responses["request"]["input"]]
        assert kinds == ["message", "compaction", "message", "message"]
        assert json.dumps(O_COMPACTION) in texts(responses["request"])
        anthropic = rt.rendered(sid, "anthropic")
        assert anthropic["folded"] == [] and "And the parser." in texts(anthropic["request"])
        assert rebuild_and_compare(store_url)["identical"]
    finally:
        rt.close()
