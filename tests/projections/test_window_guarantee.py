"""Invariant 11 over random long sessions: every head's request fits its window.

Hypothesis drives long random sessions (tool results of 0.2-20 KB, retries,
branches, attaches, merges, pins, model switches between 4k and 32k windows,
compaction with the offline summarizer, and with none) through a real
``Runtime``.  The checker of ``test_invariants`` asserts, for every commit as
it is made, that the rendered request (system + tool definitions + history,
as ``/budget`` counts it) fits ``window - output_reserve``, or that the
commit says by how much it does not, and only what no rule may fold is left.
All the other invariants are checked along, and a rebuild at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from domain.policy import Policy
from service.runtime import Runtime
from tests.projections.random_sessions import OPS, Driver, Sess, Step, fresh_store
from tests.projections.test_invariants import Checker

WINDOWS = (4_000, 8_000, 16_000, 32_000)
LONG_STEPS = st.lists(
    st.tuples(st.sampled_from(OPS + ("turn",) * 6), st.integers(0, 3), st.integers(0, 10_000),
              st.integers(0, 10_000), st.sampled_from([0, 1, 5, 20, 61])),
    min_size=60, max_size=90,
)  # fmt: skip


class WindowDriver(Driver):
    """Small windows and large tool results: the guard has work on most commits."""

    def start(self, title: str, model: str = "local:tiny") -> Sess:
        window = WINDOWS[len(self.sessions) % len(WINDOWS)]
        sid, _ = self.rt.execute("start_session", title, model, context_window=window,
                                 at=self.clock)  # fmt: skip
        sess = Sess(str(sid))
        self.sessions.append(sess)
        return sess

    def op_model(self, sess: Sess, a: int, b: int) -> None:
        self.rt.execute("switch_model", sess.sid, "local:tiny",
                        context_window=WINDOWS[b % len(WINDOWS)], at=self.clock)  # fmt: skip

    def op_tool(self, sess: Sess, a: int, b: int) -> bool | None:
        _, role = self.head(sess)
        kw: dict[str, Any] = {}
        if role not in ("assistant", "tool") or b % 5 == 0:
            caller = self.pick(sess.assistants, b)
            if caller is None:
                return False
            kw["caller"] = caller
        size = 200 + (b * 7_919) % 19_800  # 0.2 to 20 KB
        line = f"t{self.steps} {a} result line\n"
        output = (line * (size // len(line) + 1))[:size] if b % 7 else {"error": line}
        self.append(sess, "tool", name=("read_file", "grep", "todo_list", "bash")[a % 4],
                    input={"arg": f"{a}-{b}"}, output=output, **kw)  # fmt: skip
        return None


def run_long_session(url: str, steps: list[Step], compact: bool,
                     note: Callable[[str], None] = event) -> None:  # fmt: skip
    policy = Policy(tail_turns=2)
    rt = Runtime(url, policy=policy, auto_compact=compact)
    driver = WindowDriver(rt)
    checker = Checker(driver)
    try:
        driver.seed()
        checker.step(None)
        for step in steps:
            done = driver.run(step)
            note(f"op {step[0]}: {'done' if done else 'refused'}")
            checker.step(done)
        checker.finish(url)
    finally:
        rt.close()


COUNTER = iter(range(10**9))


@settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])  # fmt: skip
@given(steps=LONG_STEPS, compact=st.booleans())
def test_every_head_fits_its_window(
    store_url: str, tmp_path: Path, steps: list[Step], compact: bool
) -> None:
    with fresh_store(store_url, tmp_path, next(COUNTER)) as url:
        run_long_session(url, steps, compact)
