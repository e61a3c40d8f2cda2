"""A process holds the sessions it touches, and lets them go (issue 14).

Every answer must be the same whether a process holds the whole store or
only a session or two at a time, reloading the rest from the projection
tables as it is looked up.
"""

from __future__ import annotations

from typing import Any

import pytest

from projections.rebuild import rebuild_and_compare
from projections.session_rows import SessionRows
from service.runtime import Runtime
from tests.projections.test_context_commit import add, at, start


@pytest.fixture
def one_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """One partition's projector and its one least-recently-used order (PostgreSQL
    splits a new store in 8, each partition with its share of the budget: below)."""
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "1")


def busy_store(rt: Runtime) -> list[str]:
    """Sessions that refer to each other: a branch, an attach, a merge."""
    src = start(rt, "source")
    add(rt, src, "user", "their question")
    add(rt, src, "assistant", "their answer", 1)
    sid = start(rt)
    add(rt, sid, "user", "mine")
    fork = add(rt, sid, "assistant", "fork", 1)
    add(rt, sid, "tool", name="grep", input={"q": 1}, output="hit " * 50, minute=1.5)
    peer, _ = rt.execute("attach", sid, src, at=at(2))
    rt.execute("checkout", sid, fork, at=at(3))
    add(rt, sid, "user", "other path", 4)
    rt.execute("merge", sid, [{"node_id": peer}], at=at(6))
    branch, _ = rt.execute("branch", sid, fork, at=at(7))
    add(rt, str(branch), "user", "in the branch", 8)
    add(rt, str(branch), "assistant", "branch answer", 9)
    others = []
    for n in range(4):
        other = start(rt, f"other {n}")
        add(rt, other, "user", f"unrelated {n}", 10 + n)
        others.append(other)
    return [src, sid, str(branch), *others]


def answers(rt: Runtime, sessions: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sid in sessions:
        head = rt.head_commit(sid)
        out[sid] = {
            "head": head,
            "render": rt.rendered(sid, "openai")["request"],
            "budget": rt.budget(sid),
            "info": rt.session_info(sid),
            "explain": [rt.explain(sid, i["source_node_id"]) for i in head["items"]
                        if i["source_node_id"] and ":" not in i["item_id"]],
        }  # fmt: skip
    out["list"] = rt.sessions()
    return out


def test_a_small_working_set_answers_as_the_whole_store_does(store_url: str) -> None:
    writer = Runtime(store_url, working_set=1)  # it lets go of nearly everything, every time
    try:
        sessions = busy_store(writer)
        small = answers(writer, sessions)
    finally:
        writer.close()
    whole = Runtime(store_url, working_set=0)
    try:
        assert answers(whole, sessions) == small
    finally:
        whole.close()


def test_a_fresh_process_loads_only_the_session_it_is_asked_about(
    store_url: str, one_partition: None
) -> None:
    writer = Runtime(store_url)
    try:
        sessions = busy_store(writer)
    finally:
        writer.close()
    reader = Runtime(store_url)
    try:
        lonely = sessions[-1]
        reader.rendered(lonely, "openai")
        projector = reader.processor.projector
        assert projector is not None and projector.working is not None
        assert list(projector.working.loaded) == [lonely]
        assert {n.session_id for n in dict.values(projector.dag.nodes)} == {lonely}
        assert len(reader.sessions()) == len(sessions)  # listing needs no nodes
        assert reader.session_info(sessions[1])["counts"]["nodes"] > 0
        assert list(projector.working.loaded) == [lonely, sessions[1]]
    finally:
        reader.close()


def call_retried_in_a_branch(one: Runtime, two: Runtime) -> tuple[str, str, str, str]:
    """A call's first version in the source, its retry in a branch made at the caller,
    with an unrelated session touched in between (so a small working set lets the
    source go); the two runtimes take turns.  Source, caller, branch, unrelated."""
    src = start(one, "source")
    add(two, src, "user", "go")
    caller = add(one, src, "assistant", "two calls", 1)
    add(two, src, "tool", name="read", input={"f": 1}, output="old", minute=2, call_id="c1")
    branch, _ = two.execute("branch", src, caller, at=at(3))
    bid = str(branch)
    add(one, bid, "tool", name="read", input={"f": 2}, output="two", minute=4, call_id="c2")
    other = start(two, "elsewhere")
    add(one, other, "user", "unrelated", 4.5)
    add(two, bid, "tool", name="read", input={"f": 1}, output="new", minute=5, call_id="c1")
    return src, caller, bid, other


def test_a_call_slot_reused_in_a_branch_counts_the_evicted_sources_tools(
    store_url: str,
) -> None:
    """Whether a tool is a new version of a call asks every session's tools of that caller."""
    rt = Runtime(store_url, working_set=1, auto_compact=False)
    try:
        call_retried_in_a_branch(rt, rt)
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_a_session_that_failed_to_load_is_loaded_again_next_time(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that dies halfway must not leave the session held with half its rows."""
    writer = Runtime(store_url, auto_compact=False)
    try:
        sessions = busy_store(writer)
        expected = answers(writer, sessions[1:2])
    finally:
        writer.close()
    reader = Runtime(store_url, auto_compact=False)
    original = SessionRows.commit_metas
    failures = [1]

    def flaky(self: SessionRows, session_ids: list[str], after: int = 0) -> Any:
        if failures:
            failures.pop()
            raise ConnectionError("injected failure reading commit rows")
        return original(self, session_ids, after)

    try:
        reader.catch_up()
        monkeypatch.setattr(SessionRows, "commit_metas", flaky)
        with pytest.raises(ConnectionError):
            reader.head_commit(sessions[1])
        assert answers(reader, sessions[1:2]) == expected
    finally:
        reader.close()


def test_two_processes_writing_the_same_sessions_agree_with_a_rebuild(store_url: str) -> None:
    """Each process holds a session or two and takes up the other's rows."""
    one = Runtime(store_url, working_set=1, auto_compact=False)
    two = Runtime(store_url, working_set=1, auto_compact=False)
    try:
        src, caller, bid, other = call_retried_in_a_branch(one, two)
        add(one, src, "tool", name="read", input={"f": 3}, output="three", minute=5.5,
            caller=caller, call_id="c3")  # fmt: skip
        one.execute("pin", bid, caller, at=at(6))
        peer, _ = two.execute("attach", other, bid, at=at(7))
        add(one, other, "assistant", "after attach", 8)
        two.execute("merge", bid, [{"node_id": add(one, other, "user", "peer", 9),
                                    "session_id": other}], at=at(10))  # fmt: skip
        add(one, bid, "assistant", "merged", 11)
        sessions = [src, bid, other]
        first, second = answers(one, sessions), answers(two, sessions)
    finally:
        one.close()
        two.close()
    assert first == second
    whole = Runtime(store_url, working_set=0, auto_compact=False)
    try:
        assert answers(whole, sessions) == first
    finally:
        whole.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_a_catch_up_page_by_page_lets_sessions_go_between_pages(store_url: str) -> None:
    """Events stored but not projected, taken one page of one event at a time."""
    rt = Runtime(store_url, working_set=1, auto_compact=False, auto_catch_up=False)
    try:
        sessions = busy_store(rt)
        for n, sid in enumerate(sessions):
            rt.app.append_node(sid, role="user", input=f"late {n}", at=at(20 + n))
            rt.app.append_node(sid, role="assistant", output=f"late answer {n}", at=at(20 + n))
            rt.app.pin(sid, rt.app.session(sid).head, at=at(30 + n))
        assert rt.processor.catch_up(page=1) >= 3 * len(sessions)
    finally:
        rt.close()
    assert rebuild_and_compare(store_url)["identical"]


def test_a_session_let_go_takes_its_commits_and_nothing_else(
    store_url: str, one_partition: None
) -> None:
    rt = Runtime(store_url, working_set=1, auto_compact=False)
    try:
        sessions = busy_store(rt)
        for sid in sessions:
            rt.head_commit(sid)  # each brings its session in; the next call lets it go
        projector = rt._projector()
        assert projector.working is not None
        held = set(projector.working.loaded)
        assert held and held != set(sessions)
        assert {m.session_id for m in dict.values(projector.commits)} == held
        assert {sid for sid, _ in dict.keys(projector.latest_commit)} == held
        assert set(projector.held_commits) == held
    finally:
        rt.close()


def test_every_partition_holds_the_commits_of_the_sessions_it_holds(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same at P=8, where each partition lets go its own sessions (which of
    them it still holds depends on where the random session ids fall)."""
    monkeypatch.setenv("CTXSTORE_PARTITIONS", "8")
    rt = Runtime(store_url, working_set=1, auto_compact=False)
    try:
        for sid in busy_store(rt):
            rt.head_commit(sid)
        for part in range(rt.processor.partitions):
            projector = rt._projector(part)
            assert projector.working is not None
            held = set(projector.working.loaded)
            assert {m.session_id for m in dict.values(projector.commits)} == held
            assert {sid for sid, _ in dict.keys(projector.latest_commit)} == held
            assert set(projector.held_commits) == held
    finally:
        rt.close()


def test_a_session_asked_about_again_is_the_last_to_go(store_url: str, one_partition: None) -> None:
    """Least recently used, not least recently loaded: a read keeps a session."""
    writer = Runtime(store_url, auto_compact=False)
    try:
        one, two, three = busy_store(writer)[-3:]  # a node each
    finally:
        writer.close()
    reader = Runtime(store_url, working_set=2, auto_compact=False)
    try:
        for sid in (one, two, one, three):
            reader.head_commit(sid)
        reader.sessions()  # three nodes held: the least recently used one goes
        projector = reader.processor.projector
        assert projector is not None and projector.working is not None
        assert list(projector.working.loaded) == [one, three]
    finally:
        reader.close()


def test_reading_a_branch_leaves_its_sibling_branches_unloaded(
    store_url: str, one_partition: None
) -> None:
    """Only a new version of a call needs every branch made at its caller."""
    writer = Runtime(store_url, auto_compact=False)
    try:
        src, caller, first, _ = call_retried_in_a_branch(writer, writer)
        second, _ = writer.execute("branch", src, caller, at=at(6))
        add(writer, str(second), "tool", name="read", output="sibling", minute=7)
    finally:
        writer.close()
    reader = Runtime(store_url, auto_compact=False)
    try:
        reader.rendered(first, "openai")
        reader.branch_nodes(first)
        projector = reader.processor.projector
        assert projector is not None and projector.working is not None
        assert set(projector.working.loaded) == {src, first}
    finally:
        reader.close()


@pytest.mark.parametrize("partitions", [1, 8])
def test_the_working_set_is_the_process_budget_whatever_the_partitions(
    store_url: str, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    """Each partition holds its share: a process holds about ``working_set`` nodes, not
    ``working_set`` per partition."""
    monkeypatch.setenv("CTXSTORE_PARTITIONS", str(partitions))
    writer = Runtime(store_url, auto_compact=False)
    try:
        sessions = []
        for n in range(40):  # 160 nodes
            sid = start(writer, f"s{n}")
            for m in range(4):
                add(writer, sid, "user" if m % 2 == 0 else "assistant", f"{n}.{m}", m)
            sessions.append(sid)
    finally:
        writer.close()
    budget = 16
    reader = Runtime(store_url, working_set=budget, auto_compact=False)
    try:
        for sid in sessions:
            reader.head_commit(sid)
        held = 0
        for part in reader.processor.parts:
            if part.projector is not None and part.projector.working is not None:
                held += sum(part.projector.working.loaded.values())
        # A partition holds its share (at least one session: 4 nodes), and until its
        # next trim the session it loaded last: 20 nodes with one, 64 with eight
        # (with the whole budget each, eight held 160: every node of the store).
        share = max(-(-budget // partitions), 4)
        assert held <= partitions * (share + 4)
    finally:
        reader.close()


def test_one_sessions_nodes_come_in_the_order_they_were_projected(store_url: str) -> None:
    """A session loaded alone is read in its events' order (``seq``, its index's order,
    issue 29): the order in which they were projected, as a read of several gives it."""
    rt = Runtime(store_url)
    try:
        sessions = busy_store(rt)
        rows = SessionRows(rt.store)
        together = rows.node_rows(sessions)
        for sid in sessions:
            alone = [(r.session_id, r.node_id) for r in rows.node_rows([sid])]
            assert alone == [(r.session_id, r.node_id) for r in together if r.session_id == sid]
            assert len(alone) > 0
    finally:
        rt.close()
