"""End to end: a real uvicorn server on a loopback port drives a whole agent session.

Everything goes through the project's own Python client (``api.client``)
over HTTP: tool calls (a turn and its parallel calls as one batch), aging, a
retry, a branch, an attach, a merge, usage measured in a provider's own
shape, compaction and a checkout; then the projections are rebuilt from the
log and must come back byte-identical.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api.client import Client, Conflict
from projections.rebuild import rebuild_and_compare


@pytest.fixture
def server(live_server: str) -> Iterator[Client]:
    with Client(live_server, timeout=30) as client:
        yield client


def at(minute: int) -> str:
    return (
        f"2026-03-01T09:{minute:02d}:00+00:00"
        if minute < 60
        else (f"2026-03-01T{9 + minute // 60:02d}:{minute % 60:02d}:00+00:00")
    )


def test_whole_agent_session_over_http(server: Client, store_url: str) -> None:
    c = server
    sid = c.start_session("fix the parser", "openai:gpt-4o").session_id
    c.append_node(sid, "system", input="You are a careful engineer.", at=at(0))
    task = c.append_node(sid, "user", input="Fix the parser bug.", at=at(1))
    c.pin(sid, task.node_id)
    c.start_run(sid)
    first_tool = None
    for turn in range(6):
        # one round trip per turn: the assistant and its two parallel calls
        batch = c.append_nodes(sid, [
            {"role": "assistant", "output": f"Step {turn}: reading.", "at": at(2 + turn * 10)},
            {"role": "tool", "name": "read_file", "input": {"path": f"src/p{turn}.py"},
             "output": "\n".join(f"line {i}" for i in range(900)), "at": at(3 + turn * 10)},
            {"role": "tool", "name": "web_search", "input": {"q": "parser"}, "output": "docs",
             "at": at(4 + turn * 10)},
        ])  # fmt: skip
        first_tool = first_tool or batch.node_ids[1]
    last = c.append_node(sid, "assistant", output="Done.", at=at(70))
    assert c.get_session(sid).counts.nodes == 2 + 6 * 3 + 1

    # An edit while the agent runs is refused, and nothing is stored.
    before = c.events(sid, limit=1000)
    with pytest.raises(Conflict) as refused:
        c.edit(sid, last.node_id, output="Other")
    assert refused.value.code == "agent_running"
    assert c.events(sid, limit=1000) == before
    c.finish_run(sid)

    # Aging: the first read_file is outside the tail window, with the reason recorded.
    why = c.explain(sid, first_tool)
    rules = [t.rule for t in why.transitions]
    assert "tool_aging" in rules and "per_item_cap" in rules
    aging = next(t for t in why.transitions if t.rule == "tool_aging")
    assert "> tail 3" in aging.inputs and aging.event_id and aging.commit_id

    retry = c.retry(sid, last.node_id, output="Done, checked twice.")
    assert retry.kind == "retry"
    assert c.checkout(sid, last.node_id, version=2).version
    versions = {n.node_id: (n.version, n.versions) for n in c.dag(sid).nodes}
    assert versions[retry.node_id] == (2, 2)

    branch = c.branch(sid, last.node_id, title="alt")
    b = branch.session_id
    c.append_node(b, "user", input="Try another approach.", at=at(80))
    c.attach(sid, b)
    c.attach(sid, b)  # expands once
    items = c.context(sid).items
    attached = {i.attached_from for i in items if i.attached_from}
    assert len(attached) == 1
    opens = [i for i in items if i.item_id.endswith(":open")]
    assert len(opens) == 1

    compacted = c.compact(sid)
    assert compacted.covered
    items = c.context(sid).items
    summary = [i for i in items if i.state == "summary"]
    assert len(summary) == 1 and summary[0].rendered.startswith("[Summary]")
    assert {i.item_id for i in items if i.state == "summarized"} == set(compacted.covered)
    assert task.node_id not in compacted.covered  # pinned: never folded

    peer = c.append_node(b, "assistant", output="Alt result.", at=at(85))
    merged = c.merge(sid, [{"session_id": b, "node_id": peer.node_id}])
    head = c.context(sid)
    assert len(head.parent_ids) == 2 and head.head_node_id == merged.node_id

    # OpenAI's prompt_tokens already include the cached ones: 5000, not 5000 + 800
    c.record_usage(
        sid,
        "req-1",
        usage={
            "prompt_tokens": 5000,
            "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 800},
        },
    )
    occupancy = c.occupancy(sid)
    assert occupancy.basis == "measured" and occupancy.total_used == 5000
    assert occupancy.calibration is not None

    c.checkout(sid, last.node_id)
    assert c.occupancy(sid).basis == "estimated"

    rendered = {shape: c.render(sid, shape=shape) for shape in ("neutral", "openai", "anthropic")}
    assert all(r.head_node_id == last.node_id for r in rendered.values())
    timeline = c.timeline(sid).commits
    assert timeline and all(row.counts for row in timeline)

    result = rebuild_and_compare(store_url)
    assert result["identical"], result
    for shape, answer in rendered.items():
        assert c.render(sid, shape=shape) == answer
