"""The core of a process's runtime: its store, projections, locks and catch-up.

``service.runtime.Runtime`` is assembled from this core and from
``runtime_queries`` (reads), ``runtime_compaction`` (summaries) and its own
commands.  Here: wiring the event store to its projections, catching up
(everywhere, or the partitions a command or a worker names), and the
partition locks every read and command follow-up takes (``_locked``), plus
the idempotency keys' lookups that commands and compaction share.

Commands take their session's lock only (``CtxStore.locks``); catching up
and reading take the lock of the session's partition only (each partition
has its own projector, ``projections.processor``), so sessions of different
partitions are projected and read side by side.  Nothing slow (tokenizing a
body, a summarizer's HTTP call) runs under a partition's lock, so one
session's work never stalls another's.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from domain import commands
from domain.application import CtxStore
from domain.commands import Command
from domain.idempotency import TTL_VARIABLE, Pending, Stored, check_same_request, ttl_from
from domain.policy import Policy
from domain.store_config import database_url, working_set_budget
from domain.summarizer import Summarizer, summarizer_from_env
from domain.tenancy import check_owner
from domain.tokens import check_tokenizer
from projections import queries as q
from projections.migrate import upgrade
from projections.processor import Processor
from projections.store import ProjectionStore
from service.deployment_models import models_from_env
from service.outcome import Executed
from service.partition_locks import AllPartitions
from service.partition_locks import is_id as _is_id
from service.render_prefix import PrefixMemo
from telemetry import probes, tracing

SESSION_MAKERS = (commands.StartSession, commands.Branch)  # their result names a new session
log = logging.getLogger("ctxstore.runtime")


# session, commit, shape, model, version, cache, resets, erasures learnt of
RenderKey = tuple[str, str, str, str, int, bool, int, int]


class RuntimeCore:
    """One process's handle on the store: wiring, catch-up, locks."""

    def __init__(
        self,
        url: str | None = None,
        *,
        auto_catch_up: bool = True,
        summarizer: Summarizer | None = None,
        policy: Policy | None = None,
        auto_compact: bool = True,
        migrate: bool = True,
        working_set: int | None = None,
        partitions: int | None = None,
        idempotency_ttl: timedelta | None = None,
        models: Mapping[str, int] | None = None,
    ) -> None:
        """``working_set``: nodes a process holds in memory before it lets the least
        recently used sessions go (``CTXSTORE_WORKING_SET``; 0 holds the whole store);
        ``partitions``: P for a store with no tracking rows yet (``CTXSTORE_PARTITIONS``);
        ``idempotency_ttl``: how long a key is remembered (``CTXSTORE_IDEMPOTENCY_TTL``)."""
        check_tokenizer()
        self.url = url or database_url()
        if migrate:
            upgrade(self.url)  # every table, under a lock all processes share
        # Created above, under that lock: creating them again here, unlocked, raced
        # with other workers starting (PostgreSQL: "tuple concurrently updated").
        self.app = CtxStore(url=self.url, env={"CREATE_TABLE": "n"} if migrate else None)
        self.store = ProjectionStore(self.url)
        self.policy = policy or Policy.from_env()
        budget = working_set_budget() if working_set is None else working_set
        self.processor = Processor(self.app, self.store, self.policy, budget or None,
                                   partitions)  # fmt: skip
        self.summarizer = summarizer or summarizer_from_env()
        self.auto_catch_up = auto_catch_up
        self.auto_compact = auto_compact
        ttl = idempotency_ttl or ttl_from(os.environ.get(TTL_VARIABLE))
        self.idempotency_ttl: timedelta = ttl
        # what idempotency keys' ages are told by (a test sets another clock)
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        # the deployment's own windows (``service.deployment_models``): CTXSTORE_MODELS
        self.models = dict(models_from_env() if models is None else models)
        self._lock = AllPartitions(self.processor)  # erasure: nothing may interleave
        self._rendered: OrderedDict[RenderKey, dict[str, Any]] = OrderedDict()
        # of the window, and tokens, at render (telemetry)
        self._shares: OrderedDict[RenderKey, tuple[float, int]] = OrderedDict()
        self._prefixes = PrefixMemo()  # what each render shares with the last (traces)
        self.processor.on_stored = probes.projected  # what each batch stored: telemetry
        self.processor.on_caught_up = probes.worker_lag
        self.processor.on_working_set = probes.working_set
        self.processor.trace = tracing.span
        self.app.commit_resolver = self._latest_commit_of

    def close(self) -> None:
        self.store.close()
        self.app.close()

    # ------------------------------------------------------ catch-up, locks

    def catch_up(self, on_page: Callable[[int], None] | None = None,
                 partitions: Iterable[int] | None = None) -> int:  # fmt: skip
        """Project what is new: everywhere, or only in ``partitions`` (a worker's leases)."""
        if partitions is None:
            return self.processor.catch_up(on_page=on_page)
        return sum(self.processor.catch_up(on_page=on_page, partition=p) for p in partitions)

    def _follow(self, command: Command, result: Any) -> None:
        """After a command: catch up the partitions of the sessions it names (all if none)."""
        named = [getattr(command, "session_id", None), getattr(command, "source_session", None)]
        if isinstance(command, SESSION_MAKERS) and isinstance(result, tuple) and result:
            named.append(result[0])  # the new session's id
        found = {self.processor.partition_of(str(v)) for v in named if _is_id(v)}
        if not found or self.processor.partitions == 1:
            self.catch_up()
        for partition in sorted(found) if self.processor.partitions > 1 else ():
            self.processor.catch_up(partition=partition)

    def position(self) -> int:
        """The furthest partition's position (``positions`` for each one's)."""
        return self.store.position()

    def positions(self) -> dict[int, int]:
        return self.store.positions()

    @contextmanager
    def _locked(self, session_id: str) -> Iterator[Any]:
        """The caught-up projector of ``session_id``'s partition, under that partition's lock."""
        partition = self.processor.partition_of(session_id)
        if self.auto_catch_up:  # before the lock: a batch may wait for other partitions
            self.processor.reading(partition)
        with self._holding(partition) as projector:
            yield projector

    @contextmanager
    def _holding(self, partition: int) -> Iterator[Any]:
        """``partition``'s projector under its lock, caught up outside the lock if it was
        dropped: a catch-up may wait for another partition, whose own catch-up may be
        waiting for this lock (two threads would hang on each other for good)."""
        part = self.processor.parts[partition]
        for attempt in range(3):
            part.lock.acquire()
            if part.projector is not None or attempt == 2:
                break
            part.lock.release()
            self.processor.catch_up(partition=partition)
        try:
            yield self._projector(partition)
        finally:
            part.lock.release()

    def _projector(self, partition: int = 0) -> Any:
        part = self.processor.parts[partition]
        if part.projector is None:  # dropped (an error, an erasure) since
            self.processor.catch_up(partition=partition)
        projector = part.projector
        assert projector is not None
        working = projector.working
        if working is not None:
            evicted = working.trim()  # what the last query brought in may go now
            if evicted:
                probes.working_set(partition, len(working.loaded), working.held_nodes(), evicted)
        return projector

    def _owned(self, session_id: str, tenant: str | None) -> tuple[Any, Any]:
        """The caught-up projector and the session's row, if ``tenant`` may see it.

        Another tenant's session is unknown (``domain.tenancy.check_owner``);
        ``tenant`` None is the process itself.  A session's tenant never
        changes, so checking before the query cannot race with a writer.
        """
        projector = self._projector(self.processor.partition_of(session_id))
        session = q.session_row(projector, session_id)
        check_owner(session.tenant, tenant, session.session_id)
        return projector, session

    def _latest_commit_of(self, session_id: str, node_id: str) -> str | None:
        with self._locked(session_id) as projector:
            found: str | None = projector.commit_at(session_id, node_id)
            return found

    # ---------------------------------------------------------- idempotency

    def _claimed(self, pending: Pending | None) -> Stored | None:
        """What an earlier command with this key stored (a 422 if it was another request)."""
        if pending is None:
            return None
        stored = self.app.idempotency_claim(pending)
        if stored is not None:
            check_same_request(pending, stored)
        return stored

    def _replay(self, pending: Pending | None, stored: Stored) -> Executed:
        assert pending is not None
        check_same_request(pending, stored)
        return Executed(stored.result, replayed=True)

    def answer_for(self, pending: Pending) -> tuple[int, str] | None:
        """The answer the key's first command got, if it was recorded."""
        stored = self._claimed(pending)
        return stored.answer if stored is not None else None

    def record_answer(self, pending: Pending, status: int, body: str) -> None:
        """Remember the answer sent for ``pending``'s command (when a command stored the key)."""
        stored = self.app.idempotency_claim(pending)
        if stored is not None and stored.answer is None:
            self.app.record_answer(stored.claim, status, body, self.clock())
