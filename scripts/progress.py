"""Progress bars for long command-line work, on a terminal only.

``ctxstore import``, ``rebuild`` and ``export`` can run for minutes on a
large session.  A bar on stderr says how far they are, but only when stderr
is a terminal: piped or redirected (a script, CI, ``2>log``) nothing is
written, so the output stays what it was.  A bar also waits ``delay``
seconds before it first shows, so quick work (a small session) never
flickers one.  ``CTXSTORE_PROGRESS=0`` turns bars off, ``=1`` forces them on.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

DELAY = 0.5  # seconds of work before a bar first shows
INTERVAL = 0.1  # seconds between redraws
WIDTH = 28  # characters of the bar itself


def wanted(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Whether bars belong on ``stream``: a terminal that can redraw a line."""
    env = os.environ if env is None else env
    forced = env.get("CTXSTORE_PROGRESS", "").strip().lower()
    if forced in ("0", "no", "off", "false"):
        return False
    if forced in ("1", "yes", "on", "true"):
        return True
    if env.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def line(label: str, done: int, total: int | None, unit: str) -> str:
    """One bar: ``label [#####-----]  45%  1,234/2,743 unit``; a count when the total is unknown."""
    if not total:
        return f"{label}  {done:,} {unit}"
    share = min(1.0, done / total)
    filled = int(share * WIDTH)
    bar = "#" * filled + "-" * (WIDTH - filled)
    percent = int(share * 100)  # floored: 100% only when done
    return f"{label} [{bar}] {percent:3d}%  {done:,}/{total:,} {unit}"


class Progress:
    """Counts work done; draws it on a terminal, says nothing otherwise."""

    def __init__(self, label: str, total: int | None = None, unit: str = "", *,
                 stream: TextIO | None = None, enabled: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 delay: float | None = None) -> None:  # fmt: skip
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = wanted(self.stream) if enabled is None else enabled
        self.clock = clock
        self.started = clock()
        self.delay = DELAY if delay is None else delay
        self.done = 0
        self.drawn_at: float | None = None  # None until the bar first shows
        self.width = 0

    def advance(self, count: int = 1) -> None:
        self.update(self.done + count)

    def update(self, done: int, total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        if not self.enabled:
            return
        now = self.clock()
        if now - self.started < self.delay:
            return
        if self.drawn_at is not None and now - self.drawn_at < INTERVAL:
            return
        self._draw(now)

    def _draw(self, now: float) -> None:
        text = line(self.label, self.done, self.total, self.unit)
        pad = " " * max(0, self.width - len(text))  # wipe what a longer line left
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self.width = len(text)
        self.drawn_at = now

    def close(self) -> None:
        """Leave the finished bar on its own line, if one was shown at all."""
        if self.enabled and self.drawn_at is not None:
            self._draw(self.clock())
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
