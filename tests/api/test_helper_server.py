"""The large-body helper's life (``api.helper_server.HelperServer``).

A stand-in command runs in place of the helper server, so these tests need
no database: what is checked is when a helper is started, restarted, killed
and stopped, and that each of its exits is logged as it happens.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator

import pytest

from api import helper_server
from api.helper_server import FAILED_IN_A_ROW, HelperServer

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
QUITTER = [sys.executable, "-c", "raise SystemExit(3)"]


@pytest.fixture
def sleeper() -> Iterator[HelperServer]:
    server = HelperServer({}, command=SLEEPER)
    yield server
    server.stop()


def wait_exit(server: HelperServer) -> int:
    proc = server._proc
    assert proc is not None
    return proc.wait(timeout=30)


def test_a_stuck_helper_is_killed_and_the_next_large_body_starts_another(
    sleeper: HelperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeper.ensure()
    sleeper.running()  # it served a request before it got stuck
    stuck = sleeper._proc
    assert stuck is not None
    sleeper.failed(stuck=True)
    assert stuck.wait(timeout=30) == -9
    monkeypatch.setattr(helper_server, "RESPAWN_AFTER", 60.0)
    sleeper.ensure()  # another at once: it had served, so it is not dying young
    assert sleeper.starts == 2 and sleeper.pid != stuck.pid


def test_a_helper_stuck_on_its_first_request_is_restarted_with_backoff(
    sleeper: HelperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One that hangs on every request would make each large body wait out its
    timeout for a 503: until the backoff is over, they are served in the process."""
    sleeper.ensure()
    sleeper.failed(stuck=True)
    monkeypatch.setattr(helper_server, "RESPAWN_AFTER", 60.0)
    with pytest.raises(OSError, match="restarted 60 s after"):
        sleeper.ensure()
    monkeypatch.setattr(helper_server, "RESPAWN_AFTER", 0.0)
    sleeper.ensure()
    assert sleeper.starts == 2


def test_a_helper_is_killed_after_requests_failed_in_a_row_only(sleeper: HelperServer) -> None:
    sleeper.ensure()
    for _ in range(FAILED_IN_A_ROW - 1):
        sleeper.failed(stuck=False)
        sleeper.running()  # one served between: the count starts again
    for _ in range(FAILED_IN_A_ROW - 1):
        sleeper.failed(stuck=False)
    assert sleeper._proc is not None and sleeper._proc.poll() is None
    helper = sleeper._proc
    sleeper.failed(stuck=False)
    assert helper.wait(timeout=30) == -9


def test_a_helper_that_keeps_dying_is_restarted_with_backoff_and_each_exit_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = HelperServer({}, command=QUITTER)
    caplog.set_level(logging.WARNING, logger="ctxstore.api")
    try:
        server.ensure()
        assert wait_exit(server) == 3
        deadline = time.monotonic() + 10
        while "exited with 3" not in caplog.text:  # logged by its watcher, not on demand
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
        monkeypatch.setattr(helper_server, "RESPAWN_AFTER", 60.0)
        with pytest.raises(OSError, match="restarted 60 s after"):
            server.ensure()  # too soon: the lane serves the body in its own process
        monkeypatch.setattr(helper_server, "RESPAWN_AFTER", 0.0)
        server.ensure()
        assert server.starts == 2
    finally:
        server.stop()


def test_a_helper_that_cannot_be_started_is_an_oserror_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = HelperServer({}, command=["/nonexistent/ctxstore-helper"])
    caplog.set_level(logging.WARNING, logger="ctxstore.api")
    try:
        with pytest.raises(OSError):
            server.ensure()
        assert "could not be started" in caplog.text
        assert server.starts == 0 and server._alive is None  # no pipe end left open
    finally:
        server.stop()


def test_stop_removes_the_folder_and_a_later_start_makes_another(sleeper: HelperServer) -> None:
    sleeper.ensure()
    folder = os.path.dirname(sleeper.socket)
    assert os.path.isdir(folder)
    sleeper.stop()
    assert not os.path.exists(folder)
    sleeper.ensure()
    assert os.path.isdir(os.path.dirname(sleeper.socket))
    assert os.path.dirname(sleeper.socket) != folder


def test_a_late_failure_of_a_replaced_helper_leaves_its_replacement_alone(
    sleeper: HelperServer,
) -> None:
    """Requests in flight to a helper killed as stuck fail after it is replaced: their
    failures are the old helper's, and must not kill (or count against) the new one."""
    old = sleeper.ensure()
    assert sleeper.running(old)  # it served, then one request timed out: killed
    sleeper.failed(stuck=True, helper=old)
    new = sleeper.ensure()
    assert new != old
    fresh = sleeper._proc
    assert fresh is not None
    for _ in range(FAILED_IN_A_ROW):  # the old one's other requests end now
        sleeper.failed(stuck=True, helper=old)
    assert not sleeper.running(old)
    assert fresh.poll() is None and sleeper._proc is fresh
    for _ in range(FAILED_IN_A_ROW - 1):
        sleeper.failed(stuck=False, helper=new)
    assert fresh.poll() is None  # the old one's failures did not count
    sleeper.failed(stuck=False, helper=new)
    assert fresh.wait(timeout=30) == -9


def test_a_folder_that_could_not_be_made_is_tried_again(
    sleeper: HelperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(**_: object) -> str:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(helper_server.tempfile, "mkdtemp", full)
        with pytest.raises(OSError):
            sleeper.ensure()
    sleeper.ensure()  # the disk has room again: the lane works without a restart
    assert os.path.isdir(os.path.dirname(sleeper.socket)) and sleeper.starts == 1
