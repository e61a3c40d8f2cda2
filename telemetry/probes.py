"""The narrow calls the API and the service make; each a no-op with ``CTXSTORE_METRICS=off``.

Each probe swallows nothing and decides nothing: it records a number
(``telemetry.metrics``) and returns.  ``telemetry.metrics`` is imported on
first use, after a server chose its multiprocess directory.
"""

from __future__ import annotations

import time
from functools import cache
from types import ModuleType
from typing import Any

from telemetry import tracing
from telemetry.settings import metrics_on

ON = metrics_on()


@cache
def _m() -> ModuleType:
    from prometheus_client import disable_created_metrics

    disable_created_metrics()  # type: ignore[no-untyped-call]  # no ``*_created`` series: a scrape says what it needs
    from telemetry import metrics

    return metrics


def warm() -> None:
    """Import the metrics at a server's start (its multiprocess directory chosen by then),
    not inside its first request: that import was a fifth of a cold first read (issue 29)."""
    if ON:
        _m()


def enabled() -> bool:
    return ON


def set_enabled(on: bool) -> None:
    """Tests and benchmarks: switch the probes in this process."""
    global ON
    ON = on


def command_name(command: object) -> str:
    """A command's label: its ``name`` (``append_node``), else its class's."""
    return str(getattr(command, "name", None) or type(command).__name__)


def http_request(route: str, method: str, status: int, seconds: float) -> None:
    if ON:
        _m().HTTP_DURATION.labels(route, method, str(status)).observe(seconds)


def command(name: str, outcome: str, code: str = "") -> None:
    if ON:
        _m().COMMANDS.labels(name, outcome, code).inc()


def command_wait(name: str, stage: str, seconds: float) -> None:
    if ON:
        _m().APPEND_WAIT.labels(name, stage).observe(seconds)


def limit_refused(status: int, limit: str) -> None:
    if ON:
        _m().LIMIT_REFUSALS.labels(str(status), limit).inc()


def projected(commits: list[dict[str, Any]], transitions: list[dict[str, Any]]) -> None:
    """A projection batch was stored: its commits and the rules' state changes."""
    if not ON or not (commits or transitions):
        return
    m = _m()
    if commits:
        m.COMMITS.inc(len(commits))
        over = sum(1 for row in commits if row.get("over_window"))
        if over:
            m.OVER_WINDOW.inc(over)
    for row in transitions:
        m.TRANSITIONS.labels(str(row.get("rule")), str(row.get("to_state"))).inc()


def worker_lag(partition: int, events: int) -> None:
    if ON:
        _m().WORKER_LAG.labels(str(partition)).set(max(0, events))


def working_set(partition: int, sessions: int, nodes: int, evicted: int) -> None:
    """What a partition's working set holds after a trim, and how many sessions it let go."""
    if ON:
        m = _m()
        label = str(partition)
        m.WORKING_SET_SESSIONS.labels(label).set(sessions)
        m.WORKING_SET_NODES.labels(label).set(nodes)
        if evicted:
            m.WORKING_SET_EVICTIONS.labels(label).inc(evicted)


def rebuild_progress(done: int, total: int) -> None:
    """``ctxstore rebuild``: events replayed so far of the log's ``total``."""
    if ON:
        m = _m()
        m.REBUILD_TOTAL.set(total)
        m.REBUILD_DONE.set(done)


def compaction(trigger: str, outcome: str, folded_tokens: int = 0) -> None:
    if ON:
        m = _m()
        m.COMPACTIONS.labels(trigger, outcome).inc()
        if folded_tokens:
            m.FOLDED_TOKENS.labels("summarize").inc(folded_tokens)


class SummarizerCall:
    """One summarizer call: timed, counted by kind and outcome (and traced)."""

    def __init__(self, name: str, input_tokens: int) -> None:
        self.kind, _, self.model = name.partition(":")  # "openai:gpt-4o-mini", "extractive"
        self.input_tokens = input_tokens
        self.output_tokens: int | None = None  # counted only when traced (``traced``)
        self.started = 0.0
        self._span: Any = None
        self.traced = tracing.enabled()

    def __enter__(self) -> SummarizerCall:
        self.started = time.perf_counter()
        if self.traced:  # the GenAI semantic conventions' attributes
            llm = self.kind != "extractive"
            self._span = tracing.span(
                f"chat {self.model}" if llm else "ctxstore.summarize",
                gen_ai__operation__name="chat" if llm else None,
                gen_ai__provider__name=self.kind if llm else None,
                gen_ai__request__model=self.model or None,
                gen_ai__usage__input_tokens=self.input_tokens,
                ctxstore__summarizer=self.kind,
            )  # fmt: skip
            self._span.__enter__()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if self._span is not None:
            tracing.set_attributes(tracing.current(),
                                   gen_ai__usage__output_tokens=self.output_tokens,
                                   error__type=type(exc).__name__ if exc else None)  # fmt: skip
            self._span.__exit__(kind, exc, tb)
        if ON:
            m = _m()
            m.SUMMARIZER_CALLS.labels(self.kind, "ok" if exc is None else "failed").inc()
            m.SUMMARIZER_DURATION.labels(self.kind).observe(time.perf_counter() - self.started)


def summarizer_call(name: str, input_tokens: int) -> SummarizerCall:
    """``with summarizer_call(summarizer.name, tokens) as call: ...`` around the call."""
    return SummarizerCall(name, input_tokens)


def window_share(share: float) -> None:
    if ON:
        _m().WINDOW_SHARE.observe(share)
