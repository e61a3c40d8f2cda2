"""Gemini's ``thoughtSignature`` on function calls, kept from the tool node's metadata.

Gemini 3 refuses a tool loop whose current turn's ``functionCall`` parts lost
the signatures it gave with them.  A tool node stores the signature in its
metadata (``thoughtSignature``); the ``gemini`` shape sends it back on that
call's part, checked by ``google-genai``'s own ``Part``, and no other shape
sends it (no other provider takes it).
"""

from __future__ import annotations

import base64
import json

from google.genai import types

from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime
from tests.conftest import immediate_policy
from tests.projections.test_context_commit import add, start
from tests.projections.test_drop_in_requests import anthropic_ok, openai_ok
from tests.shape_checks import bedrock_ok, gemini_ok, responses_ok

SIGNATURE = base64.b64encode(b"gemini-thought-signature" * 4).decode()


def test_a_tool_calls_signature_goes_back_only_to_gemini(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False, policy=immediate_policy())
    try:
        sid = start(rt, model="google:gemini-2.5-pro")
        add(rt, sid, "user", "Read both files.")
        add(rt, sid, "assistant", "Reading them.", 1)
        # parallel calls: Gemini signs only the first call of a turn
        add(rt, sid, "tool", name="read_file", input={"path": "a.py"}, output="A", minute=1,
            metadata={"thoughtSignature": SIGNATURE})  # fmt: skip
        add(rt, sid, "tool", name="read_file", input={"path": "b.py"}, output="B", minute=2)
        add(rt, sid, "tool", name="grep", input={"q": "x"}, output="none", minute=3,
            metadata={"thought_signature": SIGNATURE[::-1]})  # the SDK's spelling  # fmt: skip
        gemini = rt.rendered(sid, "gemini")["request"]
        gemini_ok(gemini)
        calls = [p for c in gemini["contents"] for p in c["parts"] if "functionCall" in p]
        assert [p.get("thoughtSignature") for p in calls] == [SIGNATURE, None, SIGNATURE[::-1]]
        part = types.Part.model_validate(calls[0])
        assert part.thought_signature == base64.b64decode(SIGNATURE), "the bytes Gemini gave"
        assert part.function_call is not None and part.function_call.args == {"path": "a.py"}

        for shape, ok in (("anthropic", anthropic_ok), ("openai", openai_ok),
                          ("responses", responses_ok), ("bedrock", bedrock_ok)):  # fmt: skip
            request = rt.rendered(sid, shape)["request"]
            ok(request)
            assert SIGNATURE not in json.dumps(request), shape
        head = {i["source_node_id"]: i for i in rt.head_commit(sid)["items"]}
        assert sorted(str(i["call_signature"]) for i in head.values() if i["role"] == "tool") == \
            sorted([SIGNATURE, "None", SIGNATURE[::-1]])  # fmt: skip
        assert rebuild_and_compare(store_url)["identical"]
    finally:
        rt.close()
