"""``GET /sessions/{sid}/recall``: the original content of every node under the head.

Folded nodes (summarized, cleared) are found by what they said when they
were appended; the search covers the head's lineage only (a branch's source
up to the branch point, attached and merged heads), answers masked text
when redaction is on, refuses bad parameters with a code, and answers for
another tenant's session exactly what it answers for no session (as every
route does: ``every_route.py``).  ``test_recall_rows.py`` covers the rows:
erasure, rebuild, migration.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from api.app import create_app
from api.client import AsyncClient, Client
from api.client import context_responses as cr
from service.api_keys import KeyStore
from service.runtime import Runtime
from tests.api.conftest import LOCAL
from tests.api.test_commands import append, ok, start
from tests.api.test_redaction import SECRETS, Recording, _runtime
from tests.api.test_redaction_reads import _clean, _seed
from tests.conftest import immediate_policy


@pytest.fixture
def runtime(store_url: str) -> Iterator[Any]:
    """At summary_target 0.25, so a compaction of a short session folds most of it."""
    rt = Runtime(store_url, policy=immediate_policy(summary_target=0.25))
    try:
        yield rt
    finally:
        rt.close()


def recall(client: TestClient, sid: str, q: str, limit: int | None = None,
           **extra: Any) -> list[dict[str, Any]]:  # fmt: skip
    params: dict[str, Any] = {"q": q} if limit is None else {"q": q, "limit": limit}
    params.update(extra)
    hits: list[dict[str, Any]] = ok(client.get(f"/sessions/{sid}/recall", params=params))["hits"]
    return hits


def _folded_session(client: TestClient) -> tuple[str, dict[str, str]]:
    """A session whose every turn names its own word, compacted; word -> node id."""
    sid = start(client)
    words = {}
    append(client, sid, "user", input="let us plan the voyage")
    for i in range(6):
        word = f"zebra{i}quill"
        words[word] = append(client, sid, "user", input=f"we were researching {word} today")
        append(client, sid, "assistant", output=f"noted round {i}")
    ok(client.post(f"/sessions/{sid}/compact", json={}), 201)
    return sid, words


def test_a_summarized_node_is_found_by_its_original_text(client: TestClient) -> None:
    sid, words = _folded_session(client)
    items = ok(client.get(f"/sessions/{sid}/context"))["items"]
    states = {i["source_node_id"]: i["state"] for i in items if i["item_id"] == i["source_node_id"]}
    folded = [w for w, node in words.items() if states.get(node) == "summarized"]
    assert folded, "the compaction folded some turns"
    for word in folded:
        hits = recall(client, sid, f"what was {word}?")
        assert hits[0]["node_id"] == words[word] and hits[0]["session_id"] == sid
        assert hits[0]["state"] == "summarized" and hits[0]["role"] == "user"
        assert hits[0]["text"] == f"we were researching {word} today"
        # the node after it under the head comes along: where a question's answer is
        assert hits[0]["next_text"] == f"noted round {word[5]}"
    # stemmed: "research" finds "researching"; best first, every state as the head shows it
    hits = recall(client, sid, "research", limit=50)
    assert {h["node_id"] for h in hits} == set(words.values())
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert all(h["state"] == states[h["node_id"]] for h in hits)
    assert len(recall(client, sid, "research")) == 5  # the default limit


def test_hidden_answers_only_what_the_context_does_not_show_in_full(client: TestClient) -> None:
    sid, words = _folded_session(client)
    items = ok(client.get(f"/sessions/{sid}/context"))["items"]
    states = {i["source_node_id"]: i["state"] for i in items if i["item_id"] == i["source_node_id"]}
    shown = {w for w, node in words.items() if states.get(node) == "full"}
    assert shown and len(shown) < len(words), "some turns folded, some in view"
    everything = recall(client, sid, "research", limit=50)
    hidden = recall(client, sid, "research", limit=50, hidden="true")
    assert {h["node_id"] for h in everything} == set(words.values())  # the default: any state
    assert {h["node_id"] for h in hidden} == {words[w] for w in words if w not in shown}
    assert hidden == [h for h in everything if h["state"] != "full"]  # same order and scores
    # the limit counts hidden hits only: the full ones do not use it up
    assert recall(client, sid, "research", limit=1, hidden="true") == hidden[:1]
    word = next(iter(shown))
    assert recall(client, sid, word, hidden="true") == []
    assert recall(client, sid, word, hidden="false")[0]["node_id"] == words[word]
    assert client.get(f"/sessions/{sid}/recall", params={"q": "x", "hidden": "maybe"}
                      ).status_code == 422  # fmt: skip


def test_an_aged_tool_result_is_found_whole(client: TestClient) -> None:
    sid = start(client)
    append(client, sid, "user", input="read the config")
    caller = append(client, sid, "assistant", output="reading")
    output = "\n".join(f"line {i} kumquat" for i in range(40))
    tool = append(client, sid, "tool", name="read_file", input={"path": "conf/settings.toml"},
                  output=output, caller=caller)  # fmt: skip
    for i in range(8):
        append(client, sid, "user", input=f"next {i}")
        append(client, sid, "assistant", output=f"ok {i}")
    item = next(i for i in ok(client.get(f"/sessions/{sid}/context"))["items"]
                if i["item_id"] == tool)  # fmt: skip
    assert item["state"] != "full" and "line 39" not in item["rendered"]
    hit = recall(client, sid, "settings.toml kumquat")[0]
    assert (hit["node_id"], hit["state"], hit["role"]) == (tool, item["state"], "tool")
    assert hit["text"].startswith("read_file\n") and hit["text"].endswith(output)


def test_only_the_heads_lineage_is_searched(client: TestClient) -> None:
    a = start(client)
    append(client, a, "user", input="alpha opening words")
    point = append(client, a, "assistant", output="bravo before the branch point")
    append(client, a, "user", input="charlie after the branch point")
    branch = ok(client.post(f"/sessions/{a}/branch", json={"node_id": point}), 201)["session_id"]
    append(client, branch, "user", input="delta on the branch")
    assert [h["session_id"] for h in recall(client, branch, "bravo")] == [a]
    assert recall(client, branch, "charlie") == [], "the source after the branch point"
    assert recall(client, a, "delta") == [], "a branch is not its source's lineage"

    source = start(client)
    echo = append(client, source, "user", input="echo lives in the attached session")
    stranger = start(client)
    append(client, stranger, "user", input="foxtrot belongs to nobody here")
    ok(client.post(f"/sessions/{branch}/attach", json={"source_session": source}), 201)
    hit = recall(client, branch, "echo")
    assert [(h["node_id"], h["session_id"]) for h in hit] == [(echo, source)]
    assert recall(client, branch, "foxtrot") == []

    merged = start(client)
    append(client, merged, "user", input="golf")
    head = ok(client.get(f"/sessions/{a}"))["head"]
    ok(client.post(f"/sessions/{merged}/merge",
                   json={"peers": [{"session_id": a, "node_id": head}]}), 201)  # fmt: skip
    assert [h["session_id"] for h in recall(client, merged, "charlie")] == [a]


def test_bad_parameters_are_refused_with_a_code(client: TestClient) -> None:
    sid = start(client)
    append(client, sid, "user", input="something to find")
    for params in ({}, {"q": ""}, {"q": "x", "limit": 0}, {"q": "x", "limit": 51},
                   {"q": "x", "limit": "many"}, {"q": "x", "other": "1"}):  # fmt: skip
        answer = client.get(f"/sessions/{sid}/recall", params=params)
        assert answer.status_code == 422, params
        assert answer.json()["error"]["code"] == "invalid_request"
    # nothing searchable in it: stopwords, one-letter words, punctuation
    assert recall(client, sid, "the a of / . ?") == []
    missing = client.get("/sessions/00000000-0000-4000-8000-000000000000/recall?q=find")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "session_not_found"


def test_query_syntax_in_the_text_is_only_words(client: TestClient) -> None:
    sid = start(client)
    node = append(client, sid, "user", input="see src/app/main.py and os.path.join for NEAR")
    for q in ('"main', "main.py OR", "NEAR(main path)", "app* & !join | 'x", "path:join"):
        assert [h["node_id"] for h in recall(client, sid, q)] == [node], q


def test_the_text_is_masked_when_redaction_is_on(store_url: str) -> None:
    rt = _runtime(store_url, True, Recording())
    try:
        with TestClient(create_app(rt), base_url=LOCAL) as client:
            sid, pasted, _ = _seed(client, {})
            hits = recall(client, sid, "config please fix OPENAI read_env", limit=10)
            assert {h["node_id"] for h in hits} >= {pasted}
            assert _clean(repr(hits))
            assert any("[REDACTED:" in h["text"] for h in hits)
            # matched on the original, but a query that only a secret's own characters
            # match finds nothing: else a search would confirm a guessed secret
            # (nor with a word of the placeholder, or one the node does hold, beside it: the
            # hit, or its score, would still confirm the guess)
            for secret in ("aws_access_key", "openai_key", "github_token"):
                assert recall(client, sid, SECRETS[secret]) == [], secret
                for extra in ("aws", "redacted", "config"):
                    found = recall(client, sid, f"{extra} {SECRETS[secret]}", limit=10)
                    assert pasted not in {h["node_id"] for h in found}, (secret, extra)
            found = recall(client, sid, "config please")
            assert pasted in {h["node_id"] for h in found} and _clean(repr(found))
    finally:
        rt.close()


def test_the_clients_recall(client: TestClient, runtime: Any) -> None:
    sid, words = _folded_session(client)
    word = next(iter(words))
    answer = Client(http=client).recall(sid, f"{word} research", limit=2)
    assert isinstance(answer, cr.Recall) and len(answer.hits) == 2
    assert answer.hits[0].node_id == words[word] and answer.hits[0].text.endswith("today")

    async def drive() -> cr.Recall:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as http:
            return await AsyncClient(http=http).recall(sid, word)

    found = asyncio.run(drive())
    assert [h.node_id for h in found.hits] == [words[word]]
    assert runtime.recall(sid, word, limit=1) == found.model_dump()

    async def hidden() -> cr.Recall:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as http:
            return await AsyncClient(http=http).recall(sid, "research", limit=50, hidden=True)

    folded = Client(http=client).recall(sid, "research", limit=50, hidden=True)
    assert folded.hits and all(h.state != "full" for h in folded.hits)
    assert asyncio.run(hidden()) == folded
    assert runtime.recall(sid, "research", limit=50, hidden=True) == folded.model_dump()


def test_another_tenants_session_is_unknown(client: TestClient, runtime: Any) -> None:
    keys = KeyStore(runtime.store.engine)
    acme, globex = ({"Authorization": f"Bearer {keys.create(t, 'write')[1]}"}
                    for t in ("acme", "globex"))  # fmt: skip
    sid = ok(client.post("/sessions", json={"title": "t"}, headers=acme), 201)["session_id"]
    ok(client.post(f"/sessions/{sid}/nodes", headers=acme,
                   json={"role": "user", "input": "acme quartz plans"}), 201)  # fmt: skip
    assert len(ok(client.get(f"/sessions/{sid}/recall?q=quartz", headers=acme))["hits"]) == 1
    theirs = client.get(f"/sessions/{sid}/recall?q=quartz", headers=globex)
    nowhere = str(uuid.uuid4())
    unknown = client.get(f"/sessions/{nowhere}/recall?q=quartz", headers=globex)
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.text.replace(sid, nowhere) == unknown.text
