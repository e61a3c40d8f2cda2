"""The Responses, Gemini and Bedrock shapes, provider-native items and thinking clearing.

On the multimodal session the Anthropic and Chat shapes are checked with
(``test_drop_in_requests``): images, a PDF, signed thinking, declared tools,
the model's own call ids (one repeated), parallel calls.  Each new shape is
checked by the provider's own library (``tests.shape_checks``), with no
orphan tool pair.  Provider-native items are stored as given, counted, sent
back byte for byte to their own family and left out, audited, for another.
"""

from __future__ import annotations

import contextlib
import json
import random
from typing import Any

import pytest

from domain import errors
from domain.policy import Policy
from domain.render import SHAPES
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.projections.test_context_commit import add, at, start
from tests.projections.test_drop_in_requests import (
    THINKING,
    TOOLS,
    anthropic_ok,
    multimodal_session,
    openai_ok,
    valid,
)
from tests.shape_checks import CHECKS, bedrock_ok, gemini_ok, responses_ok

REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT" * 4}
A_COMPACTION = {"type": "compaction", "content": "Earlier: read parse.py, found the bug.",
                "signature": "c2lnbmF0dXJl" * 8}  # fmt: skip
REASONING = {"type": "reasoning", "id": "rs_0a1b2c3d4e5f",
             "summary": [{"type": "summary_text", "text": "Check the lexer first."}],
             "encrypted_content": "gAAAAABo" + "x9Zq" * 200}  # fmt: skip
O_COMPACTION = {"type": "compaction", "id": "cmp_01", "encrypted_content": "gAAAAABp" + "k" * 300}


@pytest.mark.parametrize("shape", sorted(CHECKS))
def test_each_shape_validates_against_the_providers_own_types(
    rt: Runtime, store_url: str, shape: str
) -> None:
    sid = multimodal_session(rt)
    for cache in (False, True):
        answer = rt.rendered(sid, shape, cache=cache)
        CHECKS[shape](answer["request"])
        assert answer["shape"] == shape
    again = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:  # a cold process renders the same bytes
        assert json.dumps(again.rendered(sid, shape)) == json.dumps(rt.rendered(sid, shape))
    finally:
        again.close()


def test_what_each_shape_carries_of_the_multimodal_session(rt_thinking: Runtime) -> None:
    rt = rt_thinking  # the older turn's thinking kept: the other shapes leave it out
    sid = multimodal_session(rt)
    responses = rt.rendered(sid, "responses")["request"]
    assert responses["instructions"] == "You are a careful engineer."
    assert [t["name"] for t in responses["tools"]] == [t["name"] for t in TOOLS]
    kinds = [i["type"] for i in responses["input"]]
    assert kinds == ["message", "message", "function_call", "function_call",
                     "function_call_output", "function_call_output", "message",
                     "function_call", "function_call_output"]  # fmt: skip
    assert [p["type"] for p in responses["input"][0]["content"]] == [
        "input_text", "input_image", "input_file"]  # fmt: skip
    shot = responses["input"][5]["output"]
    assert [p["type"] for p in shot] == ["input_text", "input_image"]
    assert THINKING["signature"] not in json.dumps(responses), "Anthropic's thinking left out"
    left = rt.rendered(sid, "responses")["left_out"]
    assert [(x["type"], x["made_by"], x["rule"]) for x in left] == [
        ("thinking", "anthropic", "provider_native")]  # fmt: skip
    assert rt.rendered(sid, "anthropic")["left_out"] == []

    gemini = rt.rendered(sid, "gemini")["request"]
    assert gemini["systemInstruction"] == {"parts": [{"text": "You are a careful engineer."}]}
    assert [f["name"] for f in gemini["tools"][0]["functionDeclarations"]] == [
        "read_file",
        "screenshot",
    ]
    first = gemini["contents"][0]["parts"]
    assert [next(iter(p)) for p in first] == ["text", "inlineData", "inlineData"]
    assert first[2]["inlineData"]["mimeType"] == "application/pdf"

    bedrock = rt.rendered(sid, "bedrock", cache=True)["request"]
    assert bedrock["modelId"] == "claude-sonnet-4"
    assert bedrock["system"][1] == bedrock["toolConfig"]["tools"][-1] == {
        "cachePoint": {"type": "default"}}  # fmt: skip
    assert bedrock["messages"][-1]["content"][-1] == {"cachePoint": {"type": "default"}}
    assert "cachePoint" not in json.dumps(rt.rendered(sid, "bedrock")["request"])
    ids = [b["toolUse"]["toolUseId"] for m in bedrock["messages"] for b in m["content"]
           if "toolUse" in b]  # fmt: skip
    assert ids[:2] == ["toolu_01A09q90qw90lq917835lq9", "call_0"] and len(set(ids)) == 3


def beta_anthropic_ok(request: dict[str, Any]) -> None:
    """Compaction blocks are in the SDK's beta types (the context-management beta)."""
    from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming

    valid(MessageCreateParamsNonStreaming, dict(request, max_tokens=1_024))


def test_native_items_go_back_byte_for_byte_to_their_own_family(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy(keep_thinking_turns=None))
    try:
        sid = start(rt, model="anthropic:claude-sonnet-4")
        add(rt, sid, "user", "Fix the lexer.")
        add(
            rt,
            sid,
            "assistant",
            [A_COMPACTION, REDACTED, THINKING, {"type": "text", "text": "On it."}],
            1,
            node_id="a1",
        )
        tool = add(rt, sid, "tool", name="read_file", input={"path": "lex.py"},
                   output="def lex()", call_id="toolu_01", minute=2)  # fmt: skip
        # the same agent on OpenAI's Responses API: its output items as given
        add(rt, sid, "assistant", [REASONING, O_COMPACTION,
                                   {"type": "message", "role": "assistant", "content": [
                                       {"type": "output_text", "text": "Fixed.",
                                        "annotations": []}]}], 3, node_id="a2")  # fmt: skip
        add(rt, sid, "user", "Thanks.", 4)
        items = {i["source_node_id"]: i for i in rt.head_commit(sid)["items"]}
        assert items["a1"]["blocks"][:3] == [A_COMPACTION, REDACTED, THINKING], "stored as given"
        assert items["a2"]["blocks"][:2] == [REASONING, O_COMPACTION]
        assert items["a2"]["rendered"] == "Fixed."
        assert items["a2"]["tokens"] > 200, "the encrypted reasoning and compaction count"
        assert items["a1"]["tokens"] > 60

        anthropic = rt.rendered(sid, "anthropic")
        beta_anthropic_ok(anthropic["request"])
        text = json.dumps(anthropic["request"])
        for block in (A_COMPACTION, REDACTED, THINKING):
            assert json.dumps(block) in text, "byte for byte"
        assert REASONING["encrypted_content"] not in text
        assert O_COMPACTION["encrypted_content"] not in text
        assert [(x["item_id"], x["type"], x["made_by"]) for x in anthropic["left_out"]] == [
            ("a2", "reasoning", "openai"), ("a2", "compaction", "openai")]  # fmt: skip

        responses = rt.rendered(sid, "responses")
        responses_ok(responses["request"])
        text = json.dumps(responses["request"])
        assert json.dumps(REASONING) in text and json.dumps(O_COMPACTION) in text
        kinds = [i["type"] for i in responses["request"]["input"]]
        assert kinds[-4:] == ["reasoning", "compaction", "message", "message"]
        # a2's OpenAI compaction stands for a1 and the call (domain.provider_compaction),
        # so a1's Anthropic blocks are not shown, hence not left out either
        assert [r["item_id"] for r in responses["folded"]] == ["a1", tool]
        assert responses["left_out"] == [] and "On it." not in text
        assert anthropic["folded"] == [], "nothing but the anchor before a1's compaction"

        for shape in ("openai", "gemini", "bedrock"):
            answer = rt.rendered(sid, shape)
            assert len(answer["left_out"]) == 5, shape
            dumped = json.dumps(answer["request"])
            assert "encrypted_content" not in dumped and "signature" not in dumped
        openai_ok(rt.rendered(sid, "openai")["request"])
        gemini_ok(rt.rendered(sid, "gemini")["request"])
        bedrock_ok(rt.rendered(sid, "bedrock")["request"])
    finally:
        rt.close()


def thinking_turn(n: int) -> list[dict[str, Any]]:
    return [{"type": "thinking", "thinking": f"Thought {n}. " * 40, "signature": f"sig{n}" * 30},
            {"type": "text", "text": f"Answer {n}."}]  # fmt: skip


def test_thinking_of_older_turns_is_cleared_and_audited(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        sid = start(rt, model="anthropic:claude-sonnet-4")
        add(rt, sid, "user", "Go.")
        for n in range(3):
            add(rt, sid, "assistant", thinking_turn(n), n + 1, node_id=f"a{n}")
        items = {i["source_node_id"]: i for i in rt.head_commit(sid)["items"]}
        assert [b["type"] for b in items["a2"]["blocks"]] == ["thinking", "text"], "the last"
        for old in ("a0", "a1"):
            assert items[old]["blocks"] == [{"type": "text", "text": f"Answer {old[1]}."}]
            assert items[old]["state"] == "full" and items[old]["tokens"] < 20
        rows = rt.explain(sid, "a0")["transitions"]
        assert [(r["rule"], r["from_state"], r["to_state"]) for r in rows] == [
            ("thinking_clearing", "full", "full")]  # fmt: skip
        assert rows[0]["inputs"] == "1 thinking blocks; assistant turns since: 1 >= keep 1"
        anthropic = rt.rendered(sid, "anthropic")["request"]
        anthropic_ok(anthropic)
        assert json.dumps(anthropic).count('"type": "thinking"') == 1
        assert rebuild_and_compare(store_url)["identical"]
    finally:
        rt.close()


def test_thinking_waits_for_a_batch_and_can_be_kept(store_url: str) -> None:
    batched = Runtime(store_url, auto_compact=False)  # today's default: batching on
    try:
        sid = start(batched, model="anthropic:claude-sonnet-4")
        add(batched, sid, "user", "Go.")
        for n in range(3):
            add(batched, sid, "assistant", thinking_turn(n), n + 1, node_id=f"a{n}")
        kinds = [
            [b["type"] for b in i["blocks"] or ()]
            for i in batched.head_commit(sid)["items"]
            if i["role"] == "assistant"
        ]
        assert kinds == [["thinking", "text"]] * 3, "too little to free for a cache miss"
    finally:
        batched.close()
    kept = Runtime(store_url, auto_compact=False,
                   policy=immediate_policy(keep_thinking_turns=None))  # fmt: skip
    try:
        sid = start(kept, model="anthropic:claude-sonnet-4")
        for n in range(3):
            add(kept, sid, "assistant", thinking_turn(n), n + 1)
        assert json.dumps(kept.rendered(sid, "anthropic")).count('"type": "thinking"') == 3
    finally:
        kept.close()


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("batched", [False, True])
def test_thinking_clearing_holds_its_invariants_and_rebuilds_the_same(
    store_url: str, seed: int, batched: bool
) -> None:
    """Random turns with thinking, tools, pins, unpins and forced compaction: only the
    last ``keep`` turns (and pinned ones) keep their thinking once a batch ran, states
    never loosen, and a rebuild from the events is byte-identical to the live run."""
    rng = random.Random(seed)
    keep = rng.choice([1, 2])
    policy = Policy(keep_thinking_turns=keep) if batched else immediate_policy(
        keep_thinking_turns=keep)  # fmt: skip
    rt = Runtime(store_url, auto_compact=False, policy=policy)
    try:
        sid, _ = rt.execute("start_session", "t", "anthropic:claude-sonnet-4",
                            context_window=6_000, at=at(0))  # fmt: skip
        sid = str(sid)
        add(rt, sid, "user", "Go.")
        assistants: list[str] = [add(rt, sid, "assistant", thinking_turn(0), 0)]
        pinned: set[str] = set()
        last = "assistant"
        for step in range(40):
            roll = rng.random()
            if roll < 0.45:
                node = add(rt, sid, "assistant", thinking_turn(step), step + 1)
                assistants.append(node)
                last = "assistant"
            elif roll < 0.7 and last in ("assistant", "tool"):
                last = "tool"
                add(rt, sid, "tool", name="grep", input={"q": step}, output="x\n" * 80,
                    minute=step + 1)  # fmt: skip
            elif roll < 0.8 and assistants:
                node = rng.choice(assistants)
                verb = "unpin" if node in pinned else "pin"
                rt.execute(verb, sid, node, at=at(step + 1))
                pinned.symmetric_difference_update({node})
            elif roll < 0.85:
                with contextlib.suppress(errors.NothingToCompact):
                    rt.compact(sid)
            else:
                add(rt, sid, "user", f"more {step}", step + 1)
                last = "user"
            shown = [i for i in rt.head_commit(sid)["items"]
                     if i["role"] == "assistant" and i["state"] != "summarized"]  # fmt: skip
            thinking = [i for i in shown
                        if any(b["type"] == "thinking" for b in i["blocks"] or ())]  # fmt: skip
            if not batched:
                old = {i["item_id"] for i in shown[: max(0, len(shown) - keep)]}
                assert {i["item_id"] for i in thinking} & old <= pinned
        rows = [r for c in rt.timeline(sid)
                for r in rt.commit_transitions(sid, c["commit_id"])["transitions"]
                if r["rule"] == "thinking_clearing"]  # fmt: skip
        assert rows, "some thinking was cleared"
        assert all(r["from_state"] == r["to_state"] for r in rows)
        assert rebuild_and_compare(store_url)["identical"]
    finally:
        rt.close()


def test_the_document_types_the_request_by_shape(rt_thinking: Runtime) -> None:
    """``/openapi.json``'s ``Rendered``: each shape's request checked against its own schema."""
    import jsonschema

    from api.app import create_app

    doc = create_app(rt_thinking).state.openapi
    schemas = doc["components"]["schemas"]
    text = json.dumps(schemas).replace("#/components/schemas/", "#/$defs/")
    rendered = {**json.loads(text)["Rendered"], "$defs": json.loads(text)}
    validator = jsonschema.Draft202012Validator(rendered)
    sid = multimodal_session(rt_thinking)
    answers = {shape: rt_thinking.rendered(sid, shape) for shape in SHAPES}
    for shape, answer in answers.items():
        assert not list(validator.iter_errors(answer)), shape
    swapped = dict(answers["gemini"], shape="bedrock")
    assert list(validator.iter_errors(swapped)), "a Gemini request is no Bedrock request"
