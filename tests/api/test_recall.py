"""``GET /sessions/{sid}/recall``: the original content of every node under the head.

Folded nodes (summarized, cleared) are found by what they said when they
were appended; the search covers the head's lineage only (a branch's source
up to the branch point, attached and merged heads), answers masked text
when redaction is on, and refuses bad parameters with a code.  Another
tenant's session is 404 as every route's (``every_route.py``), and the
erasure and rebuild tests cover the rows (``tests/projections/test_recall_rows.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from api.app import create_app
from api.client import AsyncClient, Client
from api.client import context_responses as cr
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


def recall(client: TestClient, sid: str, q: str, limit: int | None = None) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"q": q} if limit is None else {"q": q, "limit": limit}
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
    # stemmed: "research" finds "researching"; best first, every state as the head shows it
    hits = recall(client, sid, "research", limit=50)
    assert {h["node_id"] for h in hits} == set(words.values())
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert all(h["state"] == states[h["node_id"]] for h in hits)
    assert len(recall(client, sid, "research")) == 5  # the default limit


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
            hits = recall(client, sid, "config please fix OPENAI_API_KEY read_env", limit=10)
            assert {h["node_id"] for h in hits} >= {pasted}
            assert _clean(repr(hits))
            assert any("[REDACTED:" in h["text"] for h in hits)
            # matched on the original: a secret's own characters still find it, masked
            found = recall(client, sid, SECRETS["aws_access_key"])
            assert found and _clean(repr(found))
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
