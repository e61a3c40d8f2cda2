"""A 10,000-node session rebuilds byte-identically, on SQLite and PostgreSQL.

The session is written through the ``CtxStore`` application, one save per
100 events (fast), with the projection catching up after each save and a
compaction recorded whenever the head asks for one, much as ``Runtime``
compacts after an append.  So the replay goes through tool aging, idle
clearing, the per-item cap, reads, summaries and emergency clearing at full
size (about 14 s on SQLite and 21 s on PostgreSQL here).  Then every
projection table is dropped and rebuilt from the event log: the digests must
match, and the head renders to the same bytes from a fresh process's view of
the rebuilt tables.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from domain.rules.summarize import with_item_ids
from domain.summarizer import ExtractiveSummarizer
from projections import queries as q
from projections.rebuild import rebuild_and_compare
from service.runtime import Runtime

NODES = 10_000
CHUNK = 100  # events per save, and nodes per catch-up
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
TOOLS = ("read_file", "grep", "run_tests", "web_search", "todo_update", "shell")
LINES = [f"line {i}: {'alpha beta gamma delta '[: 6 + i % 17]}value={i * 7919 % 1000}"
         for i in range(2_000)]  # fmt: skip


def _text(rng: random.Random, chars: int) -> str:
    start = rng.randrange(len(LINES) - chars // 10)
    return "\n".join(LINES[start : start + chars // 10])[:chars]


def nodes(seed: int = 3) -> Iterator[dict[str, Any]]:
    """``append_node`` arguments: system, user task, then assistant + 1-2 tools."""
    rng = random.Random(seed)
    tick = 0

    def at() -> datetime:
        nonlocal tick
        tick += 1
        return T0 + timedelta(seconds=60 * tick)

    yield {"role": "system", "input": "You are a coding agent.", "at": at()}
    yield {"role": "user", "input": "Make the test suite pass.", "at": at()}
    recent: list[str] = []
    while True:
        yield {"role": "assistant", "output": _text(rng, rng.randint(200, 800)), "at": at()}
        for _ in range(rng.choice((1, 2))):
            node_id = f"t{tick}"
            reads = [rng.choice(recent)] if recent and rng.random() < 0.1 else []
            yield {"role": "tool", "node_id": node_id, "name": rng.choice(TOOLS),
                   "input": {"arg": _text(rng, 60)},
                   "output": _text(rng, rng.choice((200, 1500, 6000))),
                   "reads": reads, "at": at()}  # fmt: skip
            recent = (recent + [node_id])[-10:]


def compact_if_asked(rt: Runtime, sid: str, at: datetime) -> None:
    projector = rt.processor.projector_of(sid)
    commit_id = q.head_commit_id(projector, q.session_row(projector, sid))
    request = projector.commits[commit_id].summary_request if commit_id else None
    if request is None:
        return
    listed = projector.items_of(commit_id)
    items = {i.item_id: i for i in listed}
    covered = [items[i] for i in with_item_ids(request, listed)["item_ids"]]
    summarizer = ExtractiveSummarizer()
    text = summarizer.summarize([{"role": i.role, "name": i.name, "rendered": i.rendered}
                                 for i in covered])  # fmt: skip
    rt.app.record_summary(sid, [i.item_id for i in covered], text, summarizer.name, commit_id,
                          at=at)  # fmt: skip
    rt.processor.catch_up()


def build_session(rt: Runtime) -> str:
    session_id, _ = rt.app.start_session("large", "openai:gpt-4o", at=T0)
    sid = str(session_id)
    feed = nodes()
    written = 0
    while written < NODES:
        agg = rt.app.session(sid)
        for _ in range(CHUNK):
            kwargs = next(feed)
            agg.append_node(**kwargs)
        rt.app.save(agg)
        written += CHUNK
        rt.processor.catch_up()
        compact_if_asked(rt, sid, kwargs["at"])
    return sid


def rendered_bytes(rt: Runtime, sid: str) -> bytes:
    return json.dumps(rt.rendered(sid, "neutral"), sort_keys=True).encode()


def test_large_session_rebuilds_identically(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False)
    try:
        sid = build_session(rt)
        projector = rt.processor.projector_of(sid)
        assert len(projector.dag.nodes) == NODES
        summaries = [i for i in rt.head_commit(sid)["items"] if i["role"] == "summary"]
        assert summaries, "the session never compacted: the test lost its coverage"
        before = rendered_bytes(rt, sid)
    finally:
        rt.close()

    result = rebuild_and_compare(store_url)
    assert result["identical"], {
        table: (result["before"][table], result["after"][table])
        for table in result["before"] if result["before"][table] != result["after"][table]
    }  # fmt: skip
    # every node, the session's start and each summary an LLM wrote (a fold the rules made
    # from the nodes themselves, ``fold:...``, is no event)
    recorded = [s for s in summaries if s["item_id"].startswith("summary:")]
    assert result["events"] >= NODES + 1 + len(recorded)

    fresh = Runtime(store_url, migrate=False)
    try:
        assert rendered_bytes(fresh, sid) == before
    finally:
        fresh.close()
