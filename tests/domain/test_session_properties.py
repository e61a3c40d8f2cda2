"""Random command sequences against a real store keep the session's invariants.

Each example opens a new session in the test's store (SQLite or PostgreSQL)
and runs a random mix of appends with valid and invalid parents, retries,
edits, checkouts, pins and agent runs.  A small model predicts which
commands the domain must refuse; after every command the stored events must
only have grown (earlier ones unchanged byte for byte), and at the end the
DAG is acyclic, ``seq`` and versions have no gaps, and a fresh ``CtxStore``
(no cache) reloads exactly the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from domain import errors
from domain.application import CtxStore

OPS = ("user",) * 3 + ("assistant",) * 4 + ("tool",) * 4 + ("retry", "retry", "edit", "edit",
       "checkout", "version", "version", "pin", "unpin", "start", "finish", "finish",
       "model")  # fmt: skip
STEPS = st.lists(
    st.tuples(st.sampled_from(OPS), st.integers(0, 99), st.integers(0, 99), st.integers(0, 9)),
    min_size=5, max_size=30,
)  # fmt: skip
Error = type[errors.DomainError] | None


@dataclass
class Model:
    """What the session should look like: roles, parents, slots, content."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    head: str | None = None
    pinned: list[str] = field(default_factory=list)
    running: str | None = None
    model: str = "openai:gpt-4o"

    def pick(self, n: int, missing: bool = True) -> str | None:
        """An existing node, sometimes None, now and then (n % 7 == 0) an unknown one."""
        if missing and n % 7 == 0:
            return "missing"
        choices: list[str | None] = [*self.nodes, None]
        return choices[n % len(choices)]

    def siblings(self, node_id: str) -> list[str]:
        ref = self.nodes[node_id]
        return [n for n, r in self.nodes.items() if (r["parent"], r["slot"]) == (
            ref["parent"], ref["slot"])]  # fmt: skip

    def append_outcome(self, role: str, node_id: str, pred: str | None,
                       caller: str | None) -> tuple[Error, str | None]:  # fmt: skip
        """The refusal the domain must give, or the parent the node gets."""
        if node_id in self.nodes:
            return errors.DuplicateNode, None
        if node_id in (pred, caller):
            return errors.CycleRefused, None
        if pred is not None and caller is not None:
            return errors.InvalidEdge, None
        if role != "tool":
            if caller is not None:
                return errors.InvalidEdge, None
            if pred is not None and pred not in self.nodes:
                return errors.NodeNotFound, None
            return None, pred if pred is not None else self.head
        if pred is not None:
            return errors.InvalidEdge, None
        if caller is None and self.head is not None:
            head = self.nodes[self.head]
            caller = self.head if head["role"] == "assistant" else None
            caller = head["parent"] if head["role"] == "tool" else caller
        if caller is None:
            return errors.InvalidEdge, None
        if caller not in self.nodes:
            return errors.NodeNotFound, None
        if self.nodes[caller]["role"] != "assistant":
            return errors.InvalidEdge, None
        return None, caller


def run_step(app: CtxStore, sid: Any, m: Model, step: tuple[str, int, int, int], i: int) -> Error:
    """Run one command, check it against the model; return the refusal expected."""
    op, a, b, c = step
    new_id = f"{str(sid)[:8]}-n{i}"  # node ids are unique across the store, not per session
    if op in ("user", "assistant", "tool"):
        # c: 0-6 a fresh id, 7 an existing id, 8 its own parent, 9 both edges given
        node_id = str(m.pick(a, missing=False) or new_id) if c == 7 else new_id
        pred = m.pick(a) if op != "tool" and b % 2 else None
        assistants: list[str | None] = [n for n, r in m.nodes.items() if r["role"] == "assistant"]
        # a tool's caller: an assistant, any node (maybe unknown), or the default
        mine = assistants[b % len(assistants)] if assistants else None
        caller = [mine, mine, m.pick(b), None][a % 4] if op == "tool" else None
        if c == 8:
            pred, caller = (None, node_id) if op == "tool" else (node_id, None)
        if c == 9:
            pred, caller = m.pick(a) or "missing", m.pick(b) or "missing"
        error, parent = m.append_outcome(op, node_id, pred, caller)
        name = "grep" if op == "tool" else None
        content: dict[str, Any] = {"input": f"in{a}", "output": f"out{b}", "name": name}
        attempt(error, lambda: app.append_node(
            sid, role=op, node_id=node_id, predecessor=pred, caller=caller, **content))  # fmt: skip
        if error is None:
            slot = node_id if op == "tool" else ""
            m.nodes[node_id] = {"role": op, "parent": parent, "slot": slot, **content}
            m.head = node_id
        return error
    target = str(m.pick(a, missing=False) or m.pick(b, missing=False) or "missing")
    target = "missing" if b % 9 == 0 else target
    known: Error = None if target in m.nodes else errors.NodeNotFound
    if op in ("retry", "edit"):
        error = errors.AgentRunning if m.running else known
        ref = m.nodes.get(target, {})
        new = {k: ref.get(k) for k in ("input", "output", "name")}
        if op == "edit":
            new["output"] = f"{new['output']}'"
        attempt(error, lambda: app.add_sibling(sid, of=target, kind=op, node_id=new_id, **new))
        if error is None:
            m.nodes[new_id] = {**ref, **new}
            m.head = new_id
            assert app.session_events(sid)[-1].version_kind == op
        return error
    if op in ("checkout", "version"):
        versions = m.siblings(target) if known is None else []
        version = b % (len(versions) + 1) + 1 if op == "version" else None
        error = known or (errors.InvalidCommand if (version or 0) > len(versions) else None)
        attempt(error, lambda: app.checkout(sid, target, version=version))
        if error is None:
            m.head = versions[version - 1] if version else target
        return error
    if op in ("pin", "unpin"):
        attempt(known, lambda: getattr(app, op)(sid, target))
        if known is None and op == "pin" and target not in m.pinned:
            m.pinned.append(target)
        if known is None and op == "unpin" and target in m.pinned:
            m.pinned.remove(target)
        return known
    if op == "start":
        error = errors.AgentRunning if m.running else None
        attempt(error, lambda: app.start_run(sid, run_id=f"run{i}"))
        m.running = m.running or f"run{i}"
        return error
    if op == "finish":
        error = None if m.running else errors.AgentNotRunning
        attempt(error, lambda: app.finish_run(sid))
        m.running = None
        return error
    model = ["local:tiny", "no-colon", "anthropic:claude"][a % 3]
    error = errors.InvalidCommand if model == "no-colon" else None
    attempt(error, lambda: app.switch_model(sid, model))
    m.model = model if error is None else m.model
    return error


def attempt(error: Error, command: Any) -> Any:
    if error is None:
        return command()
    try:
        command()
    except error:
        return None
    raise AssertionError(f"expected {error.__name__}")


def check_dag(nodes: dict[str, dict[str, Any]]) -> None:
    for node_id in nodes:
        seen, cur = 0, node_id
        while cur is not None and cur in nodes:
            cur, seen = nodes[cur]["parent"], seen + 1
            assert seen <= len(nodes), f"cycle through {node_id}"
        assert cur is None, f"{node_id} hangs off unknown {cur}"
    seqs = [raw["seq"] for raw in nodes.values()]
    assert seqs == list(range(1, len(nodes) + 1))


def state(app: CtxStore, sid: Any) -> tuple[Any, ...]:
    agg = app.session(sid)
    return agg.nodes, agg.head, agg.pinned, agg.running, agg.model, agg.version


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(steps=STEPS)
def test_random_commands_keep_the_invariants(
    app: CtxStore, store_url: str, steps: list[tuple[str, int, int, int]]
) -> None:
    sid, _ = app.start_session(title="prop")
    m = Model()
    before = list(app.recorder.select_events(sid))
    for i, step in enumerate(steps):
        error = run_step(app, sid, m, step, i)
        event(f"{step[0]}: {error.__name__ if error else 'ok'}")
        after = list(app.recorder.select_events(sid))
        assert after[: len(before)] == before, "an earlier event changed"
        if error is not None:
            assert after == before, f"refused {step} but stored something"
        elif step[0] not in ("pin", "unpin"):  # pinning a pinned node is a no-op
            assert len(after) == len(before) + 1
        versions = [e.originator_version for e in after]
        assert versions == list(range(1, len(after) + 1))
        before = after
    agg = app.session(sid)
    check_dag(agg.nodes)
    shape = ("role", "parent", "slot")
    assert {n: [r[k] for k in shape] for n, r in agg.nodes.items()} == {
        n: [r[k] for k in shape] for n, r in m.nodes.items()}  # fmt: skip
    assert (agg.head, agg.pinned, agg.running, agg.model) == (m.head, m.pinned, m.running, m.model)
    fresh = CtxStore(url=store_url)
    try:
        assert state(fresh, sid) == state(app, sid)
        assert [e.originator_version for e in fresh.session_events(sid)][-1] == agg.version
    finally:
        fresh.close()
