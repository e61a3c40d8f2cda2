"""The demo's sample session: imported once, found again on every later start.

``ctxstore demo`` is the README's first command, and people run it more than
once; a second run must serve the same session rather than pile up copies.

The inspector should show the product on first open, at the default rules: the sample runs
in a 9,200-token window, so its tool results age, idle ones are cleared and early turns are
summarized; its first user turn is pinned; and a branch tries another approach, whose answer
the session then attaches (``add_branch_and_attach``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from domain.application import CtxStore

SAMPLE = Path(__file__).resolve().parent / "sample_session.jsonl"
STARTED_TOPIC = "domain.session:Session.Started"
EXAMPLE_PATHS = ("context", "occupancy", "timeline", "render?shape=anthropic", "events?limit=5")


def demo_session(url: str, sample: Path = SAMPLE) -> tuple[str, bool]:
    """The sample session's id, and whether it was imported just now.

    Only an empty database gets the sample (no notification recorded yet);
    otherwise the session titled like the sample, or else the oldest one.
    """
    from projections.migrate import upgrade
    from scripts.transcript import import_file

    upgrade(url)
    app = CtxStore(url=url)
    try:
        existing = _find(app, sample) if app.recorder.max_notification_id() else None
    finally:
        app.close()
    if existing is not None:
        return existing, False
    session_id = import_file(url, sample)
    if sample == SAMPLE:
        add_branch_and_attach(url, session_id)
    return session_id, True


BRANCH_AT = "a8"  # the first run's answer: the branch asks for another approach from there


def add_branch_and_attach(url: str, session_id: str) -> str:
    """A branch of the sample that tries a hand-written scanner, attached back to the
    session, so the inspector shows a branch and an attach; the branch's id."""
    from domain import commands
    from service.runtime import Runtime

    def at(minute: int) -> datetime:
        return datetime(2026, 3, 2, 11, minute, tzinfo=UTC)

    runtime = Runtime(url)
    try:
        branched = runtime.run(commands.Branch(
            source_session=session_id, node_id=BRANCH_AT, at=at(5),
            title="durations: a hand-written scanner instead?",
        )).result  # fmt: skip
        branch = str(branched[0])
        runtime.run(commands.AppendNodes(session_id=branch, at=at(6), nodes=[
            {"role": "user", "node_id": "bu1", "input": "Would a hand-written scanner be "
             "simpler than the regex? Sketch it, do not edit anything."},
            {"role": "assistant", "node_id": "ba1", "output": "A scanner is ~30 lines: read "
             "digits (and one '.'), then the longest unit that matches (ms before m), repeat. "
             "It gives better error positions but duplicates what the pair regex already says; "
             "I would keep the regex."},
        ]))  # fmt: skip
        runtime.run(commands.Attach(session_id=session_id, source_session=branch, at=at(10)))
    finally:
        runtime.close()
    return branch


def _find(app: CtxStore, sample: Path) -> str | None:
    with open(sample, encoding="utf-8") as handle:
        title = json.loads(handle.readline()).get("title")
    started = app.recorder.select_notifications(start=1, limit=10_000, topics=[STARTED_TOPIC])
    oldest = None
    for notification in started:
        event = app.mapper.to_domain_event(notification)
        oldest = oldest or str(event.originator_id)
        if getattr(event, "title", None) == title:
            return str(event.originator_id)
    return oldest


def inspector_url(base: str, session_id: str) -> str:
    """The inspector page opened on the session (the fragment never reaches the server)."""
    return f"{base}/ui#session={session_id}"


def curl_lines(base: str, session_id: str) -> list[str]:
    lines = [f"  curl -s '{base}/sessions/{session_id}/{path}'" for path in EXAMPLE_PATHS]
    return [*lines, f"  curl -s '{base}/openapi.json'"]
