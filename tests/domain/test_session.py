"""The Session aggregate through ``CtxStore``: every event, every refusal.

Each test runs on SQLite and on PostgreSQL (the ``app`` fixture).  A refusal
must leave the store exactly as it was, so ``refused`` compares the stored
events before and after, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.errors import status_for
from domain import errors, events
from domain.application import CtxStore
from domain.limits import MAX_DEPTH
from domain.node_commands import content_digest
from domain.session import Session
from domain.state_compressor import StateCompressor
from domain.tokens import ENCODING, count_tokens

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def stored(app: CtxStore, sid: Any) -> list[Any]:
    return list(app.recorder.select_events(app.session(sid).id))


def refused(app: CtxStore, sid: Any, error: type[errors.DomainError],
            command: Callable[[], object]) -> errors.DomainError:  # fmt: skip
    before = stored(app, sid)
    with pytest.raises(error) as info:
        command()
    assert stored(app, sid) == before
    assert app.session(sid).version == len(before)  # nor left in the cache
    return info.value


def nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def seeded(app: CtxStore) -> Any:
    """user u1 -> assistant a1 -> tool t1 (HEAD)."""
    sid, _ = app.start_session(title="t", model="openai:gpt-4o")
    app.append_node(sid, role="user", node_id="u1", input="hi")
    app.append_node(sid, role="assistant", node_id="a1", output="calling")
    app.append_node(sid, role="tool", node_id="t1", name="grep", input={"q": "x"}, output="hit")
    return sid


def last(app: CtxStore, sid: Any) -> Any:
    return app.session_events(sid)[-1]


def test_session_started(app: CtxStore) -> None:
    sid, version = app.start_session(title="chat", model="local:tiny", context_window=8192, at=T0)
    assert version == 1
    (started,) = app.session_events(sid)
    assert isinstance(started, events.SessionStarted)
    assert (started.title, started.model, started.context_window) == ("chat", "local:tiny", 8192)
    assert started.branched_from is None and started.timestamp == T0
    agg = app.session(sid)
    assert (agg.head, agg.running, agg.pinned, agg.nodes) == (None, None, [], {})


def test_node_appended_fields_and_created_at(app: CtxStore) -> None:
    sid, _ = app.start_session()
    at = T0 + timedelta(minutes=3)
    _, v = app.append_node(sid, role="user", node_id="u1", input="hi", metadata={"k": 1}, at=at)
    event = last(app, sid)
    assert isinstance(event, events.NodeAppended) and v == 2
    assert (event.seq, event.role, event.predecessor, event.caller) == (1, "user", None, None)
    assert event.created_at == at == event.timestamp
    assert event.metadata == {"k": 1} and event.reads == [] and event.call_id is None
    assert event.digest == content_digest("user", None, "hi", None)
    app.append_node(sid, role="assistant", node_id="a1", output="x", reads=["u1"])
    event = last(app, sid)
    assert event.reads == ["u1"] and event.predecessor == "u1"
    assert event.created_at == event.timestamp and event.created_at.tzinfo is not None
    app.append_node(sid, role="tool", node_id="t1", name="grep")
    app.append_node(sid, role="tool", node_id="t2", name="ls", call_id="call_7")
    t1, t2 = app.session_events(sid)[-2:]
    assert (t1.caller, t1.call_id, t2.caller, t2.call_id) == ("a1", "t1", "a1", "call_7")
    agg = app.session(sid)
    assert agg.head == "t2" and agg.next_seq == 5
    assert agg.node("t2").edge == "caller" and agg.node("u1").edge == "root"
    assert [agg.nodes[n]["seq"] for n in ("u1", "a1", "t1", "t2")] == [1, 2, 3, 4]


def test_retry_edit_and_checkout_of_a_sibling_version(app: CtxStore) -> None:
    sid = seeded(app)
    retry, _ = app.add_sibling(
        sid, of="t1", kind="retry", name="grep", input={"q": "x"}, output="hit"
    )
    edit, _ = app.add_sibling(sid, of="t1", kind="edit", input={"q": "y"}, output="miss")
    r_event, e_event = app.session_events(sid)[-2:]
    assert (r_event.version_kind, r_event.sibling_of, r_event.caller) == ("retry", "t1", "a1")
    assert (e_event.version_kind, e_event.name, e_event.call_id) == ("edit", "grep", "t1")
    agg = app.session(sid)
    assert agg.siblings("t1") == ["t1", retry, edit] and agg.head == edit
    target, version = app.checkout(sid, "t1", version=2, at=T0)
    moved = last(app, sid)
    assert isinstance(moved, events.HeadMoved) and target == retry
    assert (moved.node_id, moved.previous, moved.timestamp) == (retry, edit, T0)
    assert app.session(sid).head == retry and version == 7
    app.checkout(sid, "u1")
    assert app.session(sid).head == "u1"
    refused(app, sid, errors.InvalidCommand, lambda: app.checkout(sid, "t1", version=4))
    root, _ = app.add_sibling(sid, of="u1", kind="retry", input="hi")
    assert last(app, sid).version_kind == "retry" and last(app, sid).predecessor is None
    assert app.session(sid).siblings("u1") == ["u1", root]


def test_agent_run_started_and_finished(app: CtxStore) -> None:
    sid = seeded(app)
    run_id, _ = app.start_run(sid, run_id="run-1", at=T0)
    assert last(app, sid).run_id == "run-1" == run_id == app.session(sid).running
    app.finish_run(sid, status="failed")
    finished = last(app, sid)
    assert isinstance(finished, events.AgentRunFinished)
    assert (finished.run_id, finished.status, app.session(sid).running) == ("run-1", "failed", None)


def test_model_switched(app: CtxStore) -> None:
    sid = seeded(app)
    app.switch_model(sid, "anthropic:claude-sonnet-4", context_window=200_000)
    switched = last(app, sid)
    assert isinstance(switched, events.ModelSwitched) and switched.context_window == 200_000
    agg = app.session(sid)
    assert (agg.model, agg.context_window) == ("anthropic:claude-sonnet-4", 200_000)


def test_pin_and_unpin_are_idempotent(app: CtxStore) -> None:
    sid = seeded(app)
    _, v = app.pin(sid, "u1")
    assert isinstance(last(app, sid), events.NodePinned)
    assert app.pin(sid, "u1")[1] == v and app.session(sid).pinned == ["u1"]
    _, v = app.unpin(sid, "u1")
    assert isinstance(last(app, sid), events.NodeUnpinned) and app.session(sid).pinned == []
    assert app.unpin(sid, "u1")[1] == v


def test_attach_staged(app: CtxStore) -> None:
    sid = seeded(app)
    other, _ = app.start_session(title="other")
    app.append_node(other, role="user", node_id="o1")
    node_id, _ = app.attach(sid, other)
    staged = last(app, sid)
    assert isinstance(staged, events.AttachStaged)
    assert (staged.source_session, staged.source_head) == (str(other), "o1")
    assert staged.predecessor == "t1"
    ref = app.session(sid).node(node_id)
    assert (ref.role, ref.parent, app.session(sid).head) == ("attach", "t1", node_id)
    refused(app, sid, errors.InvalidCommand, lambda: app.attach(sid, sid))


def test_merge_started_and_completed(app: CtxStore) -> None:
    sid = seeded(app)
    alt, _ = app.add_sibling(sid, of="a1", kind="retry", output="other answer")
    app.checkout(sid, "t1")
    node_id, _ = app.merge(sid, [{"node_id": alt}])
    started, completed = app.session_events(sid)[-2:]
    assert isinstance(started, events.MergeStarted) and isinstance(completed, events.MergeCompleted)
    assert started.merge_id == completed.merge_id and completed.node_id == node_id
    assert completed.base == {"session_id": str(sid), "node_id": "t1"}
    assert completed.peers == [{"session_id": str(sid), "node_id": alt}]
    assert app.session(sid).node(node_id).role == "merge" and app.session(sid).head == node_id
    refused(app, sid, errors.MergeRefused, lambda: app.merge(sid, [{"node_id": node_id}]))
    refused(app, sid, errors.MergeRefused, lambda: app.merge(sid, []))


def test_usage_measured_and_summary_recorded(app: CtxStore) -> None:
    sid = seeded(app)
    app.measure_usage(sid, request_id="req-1", input_tokens=120, cache_read=100, output_tokens=9)
    usage = last(app, sid)
    assert isinstance(usage, events.UsageMeasured)
    assert (usage.head_node, usage.provider, usage.input_tokens) == ("t1", "openai", 120)
    summary_id, _ = app.record_summary(sid, ["u1", "a1"], "greeting", "extractive", "c1")
    summary = last(app, sid)
    assert isinstance(summary, events.SummaryRecorded) and summary.summary_id == summary_id
    assert (summary.covered, summary.text, summary.commit) == (["u1", "a1"], "greeting", "c1")
    refused(app, sid, errors.InvalidCommand,
            lambda: app.measure_usage(sid, request_id="r", input_tokens=-1))  # fmt: skip
    refused(app, sid, errors.InvalidCommand, lambda: app.record_summary(sid, [], "x", "y", "c"))


def test_branch_uses_the_source_node_as_predecessor(app: CtxStore) -> None:
    sid = seeded(app)
    new, version = app.branch(sid, "a1", title="b")
    (started,) = app.session_events(new)
    assert version == 1
    assert started.branched_from == {"session_id": str(sid), "node_id": "a1", "role": "assistant",
                                     "pinned": []}  # fmt: skip
    assert app.session(new).head == "a1"
    app.append_node(new, role="tool", node_id="bt", name="ls")
    app.append_node(new, role="user", node_id="bu", predecessor="a1")
    agg = app.session(new)
    assert (agg.node("bt").parent, agg.node("bu").parent) == ("a1", "a1")
    refused(app, new, errors.NodeNotFound,
            lambda: app.append_node(new, role="user", predecessor="u1"))  # fmt: skip
    refused(app, new, errors.DuplicateNode, lambda: app.append_node(new, role="user", node_id="a1"))


def test_a_branch_inherits_the_pins_on_its_chain(app: CtxStore) -> None:
    """A node pinned in the source before the branch point stays pinned in the branch."""
    sid = seeded(app)
    app.append_node(sid, role="user", node_id="u2", predecessor="u1", input="other way")
    for node in ("u1", "t1", "u2"):
        app.pin(sid, node)
    new, _ = app.branch(sid, "a1")
    (started,) = app.session_events(new)
    assert started.branched_from["pinned"] == ["u1", "t1"], "u2 is not on a1's chain"
    assert app.session(new).pinned == ["u1", "t1"]
    app.unpin(new, "u1")  # an inherited pin can be lifted in the branch alone
    assert app.session(new).pinned == ["t1"] and "u1" in app.session(sid).pinned
    grand, _ = app.branch(new, "a1")
    assert app.session(grand).pinned == ["t1"], "inherited pins pass on, being further up"


def test_refusals_have_codes_and_store_nothing(app: CtxStore) -> None:
    sid = seeded(app)
    # fmt: off
    cases: list[tuple[type[errors.DomainError], str, int, Callable[[], object]]] = [
        (errors.NodeNotFound, "node_not_found", 404,
         lambda: app.append_node(sid, role="user", predecessor="nope")),
        (errors.NodeNotFound, "node_not_found", 404,
         lambda: app.append_node(sid, role="tool", caller="nope")),
        (errors.NodeNotFound, "node_not_found", 404, lambda: app.checkout(sid, "nope")),
        (errors.NodeNotFound, "node_not_found", 404, lambda: app.pin(sid, "nope")),
        (errors.NodeNotFound, "node_not_found", 404,
         lambda: app.append_node(sid, role="user", reads=["nope"])),
        (errors.InvalidEdge, "invalid_edge", 422,
         lambda: app.append_node(sid, role="user", predecessor="u1", caller="a1")),
        (errors.InvalidEdge, "invalid_edge", 422,
         lambda: app.append_node(sid, role="tool", caller="u1")),
        (errors.InvalidEdge, "invalid_edge", 422,
         lambda: app.append_node(sid, role="tool", predecessor="a1")),
        (errors.InvalidEdge, "invalid_edge", 422,
         lambda: app.append_node(sid, role="assistant", caller="a1")),
        (errors.DuplicateNode, "duplicate_node", 409,
         lambda: app.append_node(sid, role="user", node_id="a1")),
        (errors.CycleRefused, "cycle", 422,
         lambda: app.append_node(sid, role="user", node_id="x", predecessor="x")),
        (errors.CycleRefused, "cycle", 422,
         lambda: app.append_node(sid, role="tool", node_id="y", caller="y")),
        (errors.InvalidCommand, "invalid_command", 422, lambda: app.switch_model(sid, "gpt-4o")),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="robot")),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.add_sibling(sid, of="u1", kind="edit", node_id="z" * 200)),
        # NaN and Infinity are not JSON: every render and provider would refuse the node
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="tool", input={"x": [float("nan")]}, output="o")),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="user", input="hi", output=float("inf"))),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="user", input="hi", metadata={"k": float("-inf")})),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.add_sibling(sid, of="u1", kind="edit", input={"y": float("nan")})),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="user", input={1: "int key"})),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="user", input={"when": object()})),
        # a lone surrogate is valid JSON text but not Unicode: no store can encode it
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="user", input={"q": ["\ud800"]})),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="user", input="ok", metadata={"\udfff": 1})),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="tool", name="grep\ud800", output="o")),
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="user", node_id="n\ud800", input="ok")),
        # deeper than MAX_DEPTH could be stored but never exported or served
        (errors.InvalidCommand, "invalid_command", 422,
         lambda: app.append_node(sid, role="user", input=nested(MAX_DEPTH + 1))),
        (errors.AgentNotRunning, "agent_not_running", 409, lambda: app.finish_run(sid)),
        (errors.StaleVersion, "stale_version", 409,
         lambda: app.append_node(sid, expected_version=2, role="user")),
        (errors.StaleVersion, "stale_version", 409,
         lambda: app.checkout(sid, "u1", expected_version=99)),
    ]
    # fmt: on
    for error, code, status, command in cases:
        refusal = refused(app, sid, error, command)
        # the status is the API's mapping (api.errors.STATUS), not the refusal's own
        assert (refusal.code, status_for(type(refusal))) == (code, status)
    with pytest.raises(errors.SessionNotFound):
        app.append_node("not-a-uuid", role="user")


def test_tool_needs_an_assistant_caller(app: CtxStore) -> None:
    sid, _ = app.start_session()
    refused(app, sid, errors.InvalidEdge, lambda: app.append_node(sid, role="tool"))
    app.append_node(sid, role="user", node_id="u1")
    refused(app, sid, errors.InvalidEdge, lambda: app.append_node(sid, role="tool"))
    before = app.recorder.max_notification_id()
    with pytest.raises(errors.InvalidCommand):
        app.start_session(model="no-provider")
    assert app.recorder.max_notification_id() == before


def test_agent_run_blocks_retry_edit_merge_and_a_second_run(app: CtxStore) -> None:
    sid = seeded(app)
    alt, _ = app.add_sibling(sid, of="a1", kind="retry", output="alt")
    app.checkout(sid, "t1")
    app.start_run(sid, run_id="r1")
    for command in (
        lambda: app.add_sibling(
            sid, of="t1", kind="retry", name="grep", input={"q": "x"}, output="hit"
        ),
        lambda: app.add_sibling(sid, of="a1", kind="edit", output="edited"),
        lambda: app.merge(sid, [{"node_id": alt}]),
        lambda: app.start_run(sid),
    ):
        assert refused(app, sid, errors.AgentRunning, command).code == "agent_running"
    app.append_node(sid, role="assistant", node_id="a2")  # appending is what a run does
    app.finish_run(sid)
    app.add_sibling(sid, of="a2", kind="edit", output="edited")


def test_stale_expected_version(app: CtxStore) -> None:
    sid = seeded(app)
    _, version = app.append_node(sid, role="user", node_id="u2", expected_version=4)
    refusal = refused(app, sid, errors.StaleVersion,
                      lambda: app.append_node(sid, role="user", expected_version=4))  # fmt: skip
    assert refusal.details == {"expected": 4, "actual": version}


def test_concurrent_writer_loses_and_stores_nothing(app: CtxStore, store_url: str) -> None:
    sid = seeded(app)
    other = CtxStore(url=store_url)
    try:
        other.session(sid)  # both writers now hold version 4

        def racing(agg: Session) -> str:
            app.append_node(sid, role="user", node_id="first")  # the winner saves first
            return agg.append_node("user", node_id="second")

        with pytest.raises(errors.StaleVersion):
            other._command(sid, 4, racing)
        fresh = CtxStore(url=store_url)
        assert fresh.session(sid).version == 5 and "second" not in fresh.session(sid).nodes
        assert other.session(sid).version == 5  # the loser's cache was evicted
        fresh.close()
        calls: list[int] = []

        def once(agg: Session) -> str:  # no expected version: a lost race is retried
            if not calls:
                app.append_node(sid, role="user", node_id=f"w{len(calls)}")
            calls.append(agg.version)
            return agg.append_node("user", node_id="mine")

        assert other._command(sid, None, once) == ("mine", 7)
        assert calls == [5, 6] and stored(app, sid)[-1].originator_version == 7
    finally:
        other.close()


def test_node_appended_v1_upcasts(app: CtxStore, store_url: str) -> None:
    sid = seeded(app)
    v2 = stored(app, sid)[1]
    state = app.mapper.transcoder.decode(StateCompressor().decompress(v2.state))  # as stored
    assert state.pop("class_version") == 3
    del state["reads"], state["digest"], state["token_counts"]
    state.update(node_id="legacy", seq=4, predecessor="t1")
    v1 = replace(v2, originator_version=5, state=app.mapper.transcoder.encode(state))
    event = app.mapper.to_domain_event(v1)
    assert isinstance(event, events.NodeAppended)
    assert (event.reads, event.digest, event.node_id) == ([], "", "legacy")
    app.recorder.insert_events([v1])
    fresh = CtxStore(url=store_url)
    try:
        agg = fresh.session(sid)
        assert agg.version == 5 and agg.head == "legacy" and agg.node("legacy").digest == ""
        assert fresh.session_events(sid)[-1].reads == []
        fresh.append_node(sid, role="assistant", node_id="after")
        assert fresh.session(sid).node("after").parent == "legacy"
    finally:
        fresh.close()


def test_appended_nodes_record_their_token_counts(app: CtxStore) -> None:
    """The write side measures each node's text once, under a named encoding."""
    sid = seeded(app)
    tool, user = last(app, sid), app.session_events(sid)[1]
    assert tool.token_counts == {"encoding": ENCODING, "text": count_tokens("hit"),
                                 "call": count_tokens('{"q":"x"}')}  # fmt: skip
    assert user.token_counts == {"encoding": ENCODING, "text": count_tokens("hi"), "call": 0}
    app.add_sibling(sid, "a1", kind="retry", output="calling again")
    assert last(app, sid).token_counts["text"] == count_tokens("calling again")


def test_node_appended_v2_upcasts_to_unmeasured_counts(app: CtxStore) -> None:
    sid = seeded(app)
    v3 = stored(app, sid)[1]
    state = app.mapper.transcoder.decode(StateCompressor().decompress(v3.state))  # as stored
    state["class_version"] = 2
    del state["token_counts"]
    v2 = replace(v3, state=app.mapper.transcoder.encode(state))
    event = app.mapper.to_domain_event(v2)
    assert isinstance(event, events.NodeAppended)
    assert event.token_counts is None and event.node_id == "u1"


def test_content_nested_up_to_the_limit_is_kept(app: CtxStore) -> None:
    sid = seeded(app)
    app.append_node(sid, role="user", node_id="deep", input=nested(MAX_DEPTH))
    assert app.session_events(sid)[-1].input == nested(MAX_DEPTH)


def test_an_imported_session_is_one_write_or_none(app: CtxStore) -> None:
    """``import_session`` runs every command in memory, then saves them together."""
    writes: list[int] = []
    insert = app.recorder.insert_events

    def counted(events: Any, **kwargs: Any) -> Any:
        writes.append(len(events))
        return insert(events, **kwargs)

    app.recorder.insert_events = counted  # type: ignore[method-assign]

    def build(agg: Session) -> None:
        agg.append_node("user", node_id="iu1", input="hi")
        agg.append_node("assistant", node_id="ia1", output="calling")
        agg.append_node("tool", node_id="it1", name="grep", input={"q": 1}, output="hit")
        agg.pin("iu1")

    sid, version = app.import_session("imported", "openai:gpt-4o", None, None, build)
    assert version == 5 and len(writes) == 1
    assert writes[0] == 5  # the session's events, and nothing else (no per-node claims)
    assert [e.node_id for e in app.session_events(sid)[1:4]] == ["iu1", "ia1", "it1"]

    before = app.recorder.max_notification_id()

    def refused_halfway(agg: Session) -> None:
        agg.append_node("user", node_id="ju1", input="hi")
        agg.append_node("tool", node_id="jt1", output="no caller")  # refused

    with pytest.raises(errors.InvalidEdge):
        app.import_session("half", "openai:gpt-4o", None, None, refused_halfway)

    def clashing(agg: Session) -> None:
        agg.append_node("user", node_id="ku1", input="hi")
        agg.append_node("user", node_id="iu1", input="an id the branch shows from its source")

    # An id another session holds is its own business; an exported branch must not
    # reuse an id of the history it shows, and is refused whole before any write.
    with pytest.raises(errors.DuplicateNode) as info:
        app.import_session("clash", "openai:gpt-4o", None, None, clashing,
                           branched_from={"session_id": str(sid), "node_id": "ia1"})  # fmt: skip
    assert info.value.details["node_id"] == "iu1"
    assert app.recorder.max_notification_id() == before
    assert writes[1:] == []
    other, _ = app.import_session("same ids", "openai:gpt-4o", None, None, build)
    assert [e.node_id for e in app.session_events(other)[1:4]] == ["iu1", "ia1", "it1"]
