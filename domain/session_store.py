"""Sessions in the event store: loading one, running a change on it, saving it.

``SessionStore`` is the write side's plumbing under ``CtxStore``'s commands
(``domain.application``): it loads a session for its tenant, checks the
caller's expected version, runs the change, and saves the new events in one
atomic write.  A concurrent writer that got there first makes the save fail
with an integrity error, which surfaces as ``StaleVersion`` (or, for a caller
that named no version, a few jittered retries first): nothing of the losing
command is stored.  A command sent with an idempotency key
(``domain.idempotency``) saves the key's claim in that same write.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError

from domain import errors
from domain.idempotency import (
    PENDING,
    IdempotentReplay,
    Pending,
    Stored,
    answered_event,
    claim_event,
    stored_from,
)
from domain.node_claim import InheritedIds
from domain.session import NODE_EVENTS, Session
from domain.session_locks import SessionLocks
from domain.store_config import PG_RECORDER_TOPIC, database_url, eventsourcing_env
from domain.tenancy import check_owner

T = TypeVar("T")
# The result of the command being saved, for an idempotency key's claim.
RESULT: ContextVar[tuple[Any, int] | None] = ContextVar("ctxstore_result", default=None)
# The types of the events the last command in this context saved (the runtime's
# follow-up policy is keyed by them).
SAVED: ContextVar[tuple[type[Any], ...]] = ContextVar("ctxstore_saved", default=())
LATEST = 2**62  # "up to the newest version", for a read that bypasses the cache
RACE_ATTEMPTS = 10  # jittered backoff, at most ~0.3 s in all
# (session id, node id) -> the projection's newest commit there, if it has one
CommitResolver = Callable[[str, str], "str | None"]


class SessionStore(Application[UUID]):
    """Loads, changes and saves sessions; ``CtxStore`` names the changes."""

    def __init__(self, env: Mapping[str, str] | None = None, url: str | None = None) -> None:
        merged: dict[str, str] = {}
        given = dict(env or {})
        # An explicit URL wins over eventsourcing's own variables, so the events
        # and the projections (which always follow the URL) share one database.
        if url is not None or not (
            given.get("PERSISTENCE_MODULE") or os.environ.get("PERSISTENCE_MODULE")
        ):
            merged.update(eventsourcing_env(url or database_url()))
        merged.update(given)
        # eventsourcing's own PostgreSQL recorder hangs on large events
        # (projections.pg_events); an operator's own choice of recorder still wins.
        module = merged.get("PERSISTENCE_MODULE") or os.environ.get("PERSISTENCE_MODULE")
        if module == "eventsourcing.postgres" and "APPLICATION_RECORDER_TOPIC" not in os.environ:
            merged.setdefault("APPLICATION_RECORDER_TOPIC", PG_RECORDER_TOPIC)
        super().__init__(merged)
        self.locks = SessionLocks()  # commands on one session take turns; sessions don't
        self.commit_resolver: CommitResolver = lambda session_id, node_id: None
        self.inherited = InheritedIds(self._source_nodes)

    # ------------------------------------------------------------- plumbing

    def session(self, session_id: UUID | str, tenant: str | None = None) -> Session:
        """The session as stored now; a session of a tenant other than ``tenant`` is unknown.

        Addressed by its id exactly as the API spells it: ``UUID()`` also
        parses upper case, braces and ``urn:uuid:`` forms; if those reached a
        command, the event would be stored while everything keyed by the id's
        text (the projections, the merge and attach checks) looked for
        another session.  So only the canonical form is a session id.

        The repository fast-forwards its cached copy with any events another
        process stored since.  Skipping that query (and re-checking only
        after a failure) made a single process's appends a fifth cheaper,
        but behind several API workers nearly every command then found its
        copy stale and paid a full reload from the last snapshot.  While a
        command of another thread holds the session, a read reloads instead.
        """
        try:
            sid = session_id if isinstance(session_id, UUID) else UUID(str(session_id))
        except ValueError:
            raise errors.SessionNotFound(f"not a session id: {session_id!r}") from None
        if not isinstance(session_id, UUID) and str(sid) != session_id:
            raise errors.SessionNotFound(
                f"not a session id: {session_id!r} (write it as {str(sid)!r})",
                session_id=session_id,
            )
        try:
            with self.locks.attempt(sid) as free:
                # The cached copy is shared and a command changes it in place, under
                # the session's lock; fast-forwarding it then (another thread's read)
                # mixed stored events with the command's unsaved ones.  Meanwhile a
                # read gets a copy of its own, from the last snapshot.
                agg: Any = (self.repository.get(sid) if free
                            else self.repository.get(sid, version=LATEST))  # fmt: skip
        except AggregateNotFoundError:
            raise errors.SessionNotFound(f"unknown session {sid}", session_id=str(sid)) from None
        if not isinstance(agg, Session):
            raise errors.SessionNotFound(f"unknown session {sid}", session_id=str(sid))
        check_owner(agg.tenant, tenant, str(sid))
        return agg

    def _command(
        self, session_id: UUID | str, expected_version: int | None, fn: Callable[[Session], T],
        tenant: str | None = None,
    ) -> tuple[T, int]:  # fmt: skip
        # A caller that named no version accepts whatever is current, so losing
        # a race to another writer just means running the command again on the
        # fresh state; a caller that named one is told it is stale.  Writers in
        # other processes (parallel tool results posted through several API
        # workers) can win a few rounds in a row, so the retries back off a
        # little, with jitter so the losers do not collide again in step.
        #
        # A caller without a version that still loses every round is told to
        # come back (``WriteContention``, a 503), never that it is stale: it
        # named no version to be stale against.
        attempts = 1 if expected_version is not None else RACE_ATTEMPTS
        with self.locks.hold(session_id):
            for attempt in range(attempts):
                if attempt:
                    time.sleep(random.uniform(0, min(0.05, 0.002 * 2**attempt)))
                agg = self.session(session_id, tenant)
                try:
                    agg.expect_version(expected_version)
                    result = fn(agg)
                    # This command's own nodes, as its events name them.  Not the nodes
                    # the copy gained meanwhile: the cached copy is shared, and a read in
                    # another thread fast-forwards it in place with what another process
                    # stored (which would read as duplicates of what it stored).
                    added = [e.node_id for e in agg.pending_events
                             if isinstance(e, NODE_EVENTS)]  # fmt: skip
                    self.refuse_inherited(agg, added)
                    RESULT.set((result, agg.version))
                    self._save(agg, added=added)
                except errors.StaleVersion:
                    self._evict(agg.id)
                    if expected_version is not None:
                        raise
                    if attempt + 1 == attempts:
                        raise errors.WriteContention(
                            f"other writers changed session {agg.id} {attempts} times in a "
                            "row; nothing was stored, retry shortly"
                        ) from None
                    continue
                except BaseException:
                    self._evict(agg.id)
                    raise
                return result, agg.version
        raise AssertionError("unreachable")

    def refuse_stored(self, session_id: UUID, base: int, added: Sequence[str]) -> None:
        """DuplicateNode if what another writer stored after version ``base`` gave a node
        one of the ``added`` ids.

        Asked only after a save lost to another writer: the session's own
        version key is what refused the write, and this says whether the
        winner took one of this command's node ids (a duplicate, whatever
        the caller retries) or just moved the session on (stale).  The ids
        need no store of their own: a session's nodes are its own events.
        Only the winner's events are read, not the session rebuilt: the
        winner may be an erasure, whose record is the session's last event.
        """
        wanted = set(added)
        if not wanted:
            return
        for event in self.events.get(session_id, gt=base):
            if isinstance(event, NODE_EVENTS) and event.node_id in wanted:
                raise errors.DuplicateNode(
                    f"node id {event.node_id!r} is already used in this session",
                    node_id=event.node_id,
                )

    def refuse_inherited(self, agg: Session, added: Sequence[str]) -> None:
        """DuplicateNode if a new node of a branch reuses an id the branch shows.

        A branch shows its source's history up to the branch point under the
        source's ids; a node of its own with one of those ids would make an id
        name two nodes in one context (a pin, a summary's covered items, a
        checkout).  The source's nodes stored up to the branch point are
        refused, a little more than the chain the branch shows, but decided
        from the aggregates alone.
        """
        if agg.branched_from is None or not added:
            return
        inherited = self.inherited(agg.branched_from)
        for node_id in added:
            if node_id in inherited:
                raise errors.DuplicateNode(
                    f"node id {node_id!r} is a node of the history this branch shows",
                    node_id=node_id,
                )

    def _source_nodes(self, session_id: str) -> tuple[dict[str, Any], Any] | None:
        """A branch source's nodes and its own branch point, or None if it was erased."""
        try:
            source = self.session(session_id)
        except errors.SessionNotFound:
            return None
        return source.nodes, source.branched_from

    def _save(self, agg: Session, added: Sequence[str] = ()) -> None:
        """Save the session's new events and, when the command came with an
        idempotency key, the key's claim, in one atomic write.

        A conflict is a key a concurrent retry already used (that command's
        result is the answer: ``IdempotentReplay``), one of the ``added`` node
        ids that the winning writer gave a node of this session
        (``DuplicateNode``), or just a newer version of the session: say which.
        """
        pending = PENDING.get()
        extra = []
        if pending is not None:  # the command's result, as the key's claim remembers it
            result = RESULT.get() or (None, agg.version)
            # the claim's time is the request's (its age is the key's), not the session's
            extra.append(claim_event(pending, str(agg.id), result, pending.at))
        recorded = tuple(type(event) for event in agg.pending_events)
        base = agg.version - len(recorded)  # the version this command's events follow
        try:
            self.save(agg, *extra)
            SAVED.set(recorded)
        except UnicodeEncodeError:
            # A lone surrogate (\ud800, which JSON can spell) is text no store can encode;
            # it fails while the events are serialised, before any is written.
            raise errors.InvalidCommand(
                "text holds a lone surrogate, which is not Unicode text"
            ) from None
        except IntegrityError:
            if pending is not None:
                stored = self.idempotency_claim(pending)
                if stored is not None:
                    raise IdempotentReplay(stored) from None
            self.refuse_stored(agg.id, base, added)
            raise errors.StaleVersion(
                "another writer changed this session first; reload and retry"
            ) from None

    def idempotency_claim(self, pending: Pending) -> Stored | None:
        """What the store holds for ``pending``'s key: None if no command used it yet,
        or if that claim expired (or was erased)."""
        for claim in pending.lookups():
            records = self.recorder.select_events(claim)
            stored = stored_from([self.mapper.to_domain_event(r) for r in records], pending)
            if stored is not None:
                return stored
        return None

    def record_answer(self, claim: UUID, status: int, body: str, at: datetime) -> None:
        """Remember the answer a key's command got, for retries; the first one recorded wins."""
        try:
            self.save(answered_event(claim, status, body, at))
        except IntegrityError:
            pass  # a concurrent retry recorded it first

    def _evict(self, session_id: UUID) -> None:
        cache = self.repository.cache
        if cache is not None:
            try:
                cache.get(session_id, evict=True)
            except KeyError:
                pass

    # ---------------------------------------------------------------- reads

    def session_events(
        self, session_id: UUID | str, gt: int | None = None, limit: int | None = None,
        lte: int | None = None, tenant: str | None = None,
    ) -> list[Any]:  # fmt: skip
        """The replay feed: a session's events in order, optionally a page of them."""
        agg_id = self.session(session_id, tenant).id
        return list(self.events_of(agg_id, gt=gt, lte=lte, limit=limit))

    def events_of(self, agg_id: UUID, gt: int | None = None, lte: int | None = None,
                  limit: int | None = None) -> list[Any]:  # fmt: skip
        return list(self.events.get(agg_id, gt=gt, lte=lte, limit=limit))

    def replay(self, session_id: UUID | str, version: int) -> Session:
        """The session as it stood after its ``version``-th event."""
        sid = self.session(session_id).id
        agg: Any = self.repository.get(sid, version=version)
        assert isinstance(agg, Session)
        return agg
