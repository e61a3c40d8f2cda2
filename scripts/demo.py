"""The demo's sample session: imported once, found again on every later start.

``ctxstore demo`` is the README's first command, and people run it more than
once; a second run must serve the same session rather than pile up copies.
"""

from __future__ import annotations

import json
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
    return import_file(url, sample), True


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
