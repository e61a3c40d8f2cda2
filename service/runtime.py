"""Wires the event-sourced application to its projections, in one process.

Commands go to ``CtxStore``; after each one the projections catch up from
the notification log before the call returns, so a client reads its own
writes.  Queries catch up first too (cheaply: one max-id query when nothing
is new), so a second worker process serves what the first one wrote.

``Runtime`` is assembled from cohesive parts: ``runtime_core`` (wiring,
catch-up, partition locks, idempotency lookups), ``runtime_queries``
(reads), ``runtime_compaction`` (summaries), and here the commands with
their follow-ups.  A command's answer tells the truth
(``service.outcome``): once stored, it is a success, with any failed
follow-up named beside the result.
"""

from __future__ import annotations

import time
from typing import Any

from domain import commands, errors
from domain.commands import Command
from domain.idempotency import PENDING, IdempotentReplay, Pending
from domain.session_store import SAVED
from service.compaction import grows_context
from service.deployment_models import with_deployment_window
from service.outcome import Executed
from service.runtime_compaction import Compaction
from service.runtime_queries import RENDER_CACHE, Queries
from telemetry import probes, tracing

__all__ = ["RENDER_CACHE", "Runtime"]


class Runtime(Compaction, Queries):
    """One process's handle on the store: commands, catch-up, queries."""

    def execute(self, command: Command | str, *args: Any, **kwargs: Any) -> Any:
        """Run ``command``, catch up, and compact if the head asks for it."""
        return self.run(command, *args, **kwargs).result

    def run(self, command: Command | str, *args: Any, idempotency: Pending | None = None,
            **kwargs: Any) -> Executed:  # fmt: skip
        """``execute``, saying which follow-up failed; with a key, at most once per key.

        ``command`` is a ``domain.commands`` object, or a ``CtxStore`` method name
        with its arguments (``commands.from_call`` builds the object).
        """
        if isinstance(command, str):
            command = commands.from_call(command, *args, **kwargs)
        elif args or kwargs:
            raise TypeError("a command object takes no further arguments")
        with tracing.span("ctxstore.command", ctxstore__command=probes.command_name(command)):
            return self._run(command, idempotency)

    def _run(self, command: Command, idempotency: Pending | None) -> Executed:
        command = with_deployment_window(command, self.models)
        stored = self._claimed(idempotency)
        if stored is not None:
            return Executed(stored.result, replayed=True)
        token = PENDING.set(idempotency)
        SAVED.set(())  # what this command saves, for its follow-ups
        name = probes.command_name(command)
        started = time.perf_counter()
        try:
            with tracing.span("ctxstore.event_write"):
                result = commands.handle(self.app, command)
        except IdempotentReplay as won:  # a concurrent retry with this key stored it
            return self._replay(idempotency, won.stored)
        except errors.DomainError:
            # A concurrent retry stored this very command first (its node id is taken now).
            stored = self._claimed(idempotency)
            if stored is None:
                raise
            return Executed(stored.result, replayed=True)
        finally:
            PENDING.reset(token)
        # The command has committed.  If the projection cannot follow right now
        # (a lock held elsewhere, a dropped connection) or the summarizer fails,
        # that must not turn the stored command into an error a client would
        # retry, storing it twice: the next catch-up or command takes it up.
        done = Executed(result)
        written = time.perf_counter()
        probes.command_wait(name, "event_store", written - started)
        try:
            with tracing.span("ctxstore.catch_up"):
                self._follow(command, result)
        except Exception as exc:
            done.failed("catch_up", exc)
            return done
        finally:
            probes.command_wait(name, "catch_up", time.perf_counter() - written)
        if self.auto_compact and grows_context(SAVED.get()):
            session_id = str(getattr(command, "session_id", None))
            try:
                version = self._auto_compact(session_id)
            except Exception as exc:
                done.failed("compaction", exc)
            else:
                if version is not None and isinstance(result, tuple):
                    done.result = (result[0], version)  # the version the client must send next
        return done
