"""Drives random command sequences through a real ``Runtime``.

A step is ``(op, session, a, b, minutes)``: ``op`` names the command,
``session`` picks which of the open sessions it targets, ``a`` and ``b``
pick nodes, sizes and names (modulo what exists), ``minutes`` advances the
event clock.  Commands the domain refuses are skipped: refusals are tested
elsewhere, and a refused command stores nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from domain import errors
from service.runtime import Runtime

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OPS = ("turn",) * 6 + ("user",) * 2 + ("tool",) * 2 + (
    "assistant", "retry", "edit", "checkout", "checkout", "pin", "pin", "unpin", "model",
    "branch", "attach", "attach", "merge", "merge", "usage", "compact")  # fmt: skip
TOOLS = ("read_file", "grep", "todo_list", "web_search")
MODELS = ("local:tiny", "local:tiny", "openai:gpt-4o", "anthropic:claude-sonnet-4")
MAX_SESSIONS = 4

Step = tuple[str, int, int, int, int]
STEPS = st.lists(
    st.tuples(st.sampled_from(OPS), st.integers(0, 3), st.integers(0, 10_000),
              st.integers(0, 10_000), st.sampled_from([0, 1, 5, 20, 59, 61, 90])),
    min_size=20, max_size=40,
)  # fmt: skip


def text(kind: int, tag: str) -> str:
    """Short, medium, long (past the per-item cap) or many-line text."""
    return [f"{tag}", f"{tag} " * 60, f"{tag} line of output\n" * 300, "x" * 5_000][kind % 4]


def tool_output(kind: int, tag: str) -> Any:
    return ["", f"{tag}: one line", text(2, tag), {"error": f"{tag} failed"}, None][kind % 5]


@dataclass
class Sess:
    sid: str
    nodes: list[str] = field(default_factory=list)  # every node a command may name
    content: dict[str, dict[str, Any]] = field(default_factory=dict)  # own message nodes
    assistants: list[str] = field(default_factory=list)
    pinned: set[str] = field(default_factory=set)


@dataclass
class Driver:
    rt: Runtime
    sessions: list[Sess] = field(default_factory=list)
    roles: dict[str, str] = field(default_factory=dict)  # node id -> role, every session
    clock: datetime = T0
    steps: int = 0

    def start(self, title: str, model: str = "local:tiny") -> Sess:
        sid, _ = self.rt.execute("start_session", title, model, at=self.clock)
        sess = Sess(str(sid))
        self.sessions.append(sess)
        return sess

    def seed(self) -> None:
        """A main session and an independent one to attach from."""
        for title in ("main", "source"):
            sess = self.start(title)
            self.append(sess, "system", input="be helpful")
            self.append(sess, "user", input=f"{title} task")
            self.append(sess, "assistant", output=f"{title} plan")

    def append(self, sess: Sess, role: str, **kw: Any) -> str:
        node, _ = self.rt.execute("append_node", sess.sid, role=role, at=self.clock, **kw)
        self._known(sess, str(node), role)
        sess.content[str(node)] = {"role": role, **{k: kw.get(k) for k in
                                                    ("name", "input", "output")}}  # fmt: skip
        return str(node)

    def _known(self, sess: Sess, node: str, role: str) -> None:
        sess.nodes.append(node)
        self.roles[node] = role
        if role == "assistant":
            sess.assistants.append(node)

    def head(self, sess: Sess) -> tuple[str | None, str | None]:
        agg = self.rt.app.session(sess.sid)
        if agg.head is None:
            return None, None
        ref = agg.node(agg.head)
        return agg.head, ref.role

    def run(self, step: Step) -> str | None:
        """Apply one step; the name of what was done, or None when refused."""
        op, pick, a, b, minutes = step
        self.clock += timedelta(minutes=minutes)
        self.steps += 1
        sess = self.sessions[pick % len(self.sessions)]
        try:
            done = getattr(self, f"op_{op}")(sess, a, b)
        except errors.DomainError:
            return None
        return op if done is not False else None

    @staticmethod
    def pick(items: list[str], n: int) -> str | None:
        return items[n % len(items)] if items else None

    # ---------------------------------------------------------------- ops

    def op_user(self, sess: Sess, a: int, b: int) -> None:
        read = self.pick(sess.nodes, b) if b % 3 == 0 else None
        self.append(sess, "user", input=text(a, f"u{self.steps}"),
                    reads=[read] if read else [])  # fmt: skip

    def op_assistant(self, sess: Sess, a: int, b: int) -> None:
        picks = [self.pick(sess.nodes, b), self.pick(sess.nodes, a)]
        reads = [n for n in dict.fromkeys(picks) if n][: b % 3]
        self.append(sess, "assistant", output=text(a, f"a{self.steps}"), reads=reads)

    def op_turn(self, sess: Sess, a: int, b: int) -> None:
        """One agent turn: an assistant message and the tools it calls."""
        self.append(sess, "assistant", output=text(a // 7, f"a{self.steps}"))
        for n in range(a % 4):
            self.op_tool(sess, b + n, b // 3 + n)

    def op_tool(self, sess: Sess, a: int, b: int) -> bool | None:
        _, role = self.head(sess)
        kw: dict[str, Any] = {}
        if role not in ("assistant", "tool") or b % 5 == 0:
            caller = self.pick(sess.assistants, b)
            if caller is None:
                return False
            kw["caller"] = caller
        name = TOOLS[a % len(TOOLS)]
        self.append(sess, "tool", name=name, input={"arg": f"{name}-{b}" * (1 + b % 40)},
                    output=tool_output(b, f"t{self.steps}"), **kw)  # fmt: skip
        return None

    def _sibling(self, sess: Sess, a: int, edit: bool) -> bool | None:
        node = self.pick(list(sess.content), a)  # insertion order: ids are random
        if node is None:
            return False
        body = dict(sess.content[node])
        role = body.pop("role")
        if edit:
            key = "input" if role in ("user", "system") else "output"
            body[key] = f"edited {self.steps}: {body.get(key)}"[:3_000]
        new, _ = self.rt.execute(
            "add_sibling",
            sess.sid,
            of=node,
            at=self.clock,
            kind="edit" if edit else "retry",
            **body,
        )
        self._known(sess, str(new), role)
        sess.content[str(new)] = {"role": role, **body}
        return None

    def op_retry(self, sess: Sess, a: int, b: int) -> bool | None:
        return self._sibling(sess, a, edit=False)

    def op_edit(self, sess: Sess, a: int, b: int) -> bool | None:
        return self._sibling(sess, a, edit=True)

    def op_checkout(self, sess: Sess, a: int, b: int) -> bool | None:
        node = self.pick(sess.nodes, a)
        if node is None:
            return False
        self.rt.execute("checkout", sess.sid, node, at=self.clock)
        return None

    def op_pin(self, sess: Sess, a: int, b: int) -> bool | None:
        node = self.pick(sess.nodes, a)
        if node is None:
            return False
        self.rt.execute("pin", sess.sid, node, at=self.clock)
        sess.pinned.add(node)
        return None

    def op_unpin(self, sess: Sess, a: int, b: int) -> bool | None:
        order = {n: i for i, n in enumerate(sess.nodes)}
        node = self.pick(sorted(sess.pinned, key=lambda n: (order.get(n, -1), n)), a)
        if node is None:
            return False
        self.rt.execute("unpin", sess.sid, node, at=self.clock)
        sess.pinned.discard(node)
        return None

    def op_model(self, sess: Sess, a: int, b: int) -> None:
        window = [None, None, 6_000, 200_000][b % 4]
        self.rt.execute("switch_model", sess.sid, MODELS[a % len(MODELS)],
                        context_window=window, at=self.clock)  # fmt: skip

    def op_branch(self, sess: Sess, a: int, b: int) -> bool | None:
        node = self.pick(sess.nodes, a)
        if node is None or len(self.sessions) >= MAX_SESSIONS:
            return False
        sid, _ = self.rt.execute("branch", sess.sid, node, at=self.clock)
        inherited = set(self.rt.app.session(str(sid)).pinned)  # the pins on its chain
        branch = Sess(str(sid), nodes=[node], pinned=inherited)
        if self.roles.get(node) == "assistant":
            branch.assistants.append(node)
        self.sessions.append(branch)
        return None

    def op_attach(self, sess: Sess, a: int, b: int) -> bool | None:
        others = [s for s in self.sessions if s.sid != sess.sid]
        source = others[a % len(others)]
        node, _ = self.rt.execute("attach", sess.sid, source.sid, at=self.clock)
        self._known(sess, str(node), "attach")
        return None

    def op_merge(self, sess: Sess, a: int, b: int) -> bool | None:
        if b % 3 == 0:
            other = self.sessions[a % len(self.sessions)]
            node = self.pick(other.nodes, b)
            peer = {"session_id": other.sid, "node_id": node}
        else:
            node = self.pick(sess.nodes, a)
            peer = {"node_id": node}
        if node is None or node == self.head(sess)[0]:
            return False
        merge, _ = self.rt.execute("merge", sess.sid, [peer], at=self.clock)
        self._known(sess, str(merge), "merge")
        return None

    def op_usage(self, sess: Sess, a: int, b: int) -> None:
        self.rt.execute("measure_usage", sess.sid, request_id=f"req-{self.steps}",
                        input_tokens=a, cache_read=b % 500, at=self.clock)  # fmt: skip

    def op_compact(self, sess: Sess, a: int, b: int) -> None:
        self.rt.compact(sess.sid)


def rendered_bytes(rt: Runtime, sid: str, shape: str, commit_id: str | None = None) -> str:
    return json.dumps(rt.rendered(sid, shape, commit_id))


@contextmanager
def fresh_store(kind_url: str, tmp: Path, n: int) -> Iterator[str]:
    """An empty store of the same kind as ``kind_url``: one per hypothesis example."""
    from tests.conftest import empty_store

    kind = "sqlite" if kind_url.startswith("sqlite") else "postgres"
    with empty_store(kind, tmp, f"example-{n}") as url:
        yield url
