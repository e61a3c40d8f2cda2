"""Wires the event-sourced application to its projections, in one process.

Commands go to ``CtxStore``; after each one the projections catch up from
the notification log before the call returns, so a client reads its own
writes.  Queries catch up first too (cheaply: one max-id query when nothing
is new), so a second worker process serves what the first one wrote.

Commands take their session's lock only (``CtxStore.locks``); catching up
and reading take the lock of the session's partition only (each partition
has its own projector, ``projections.processor``), so sessions of different
partitions are projected and read side by side.  Nothing slow (tokenizing a
body, a summarizer's HTTP call) runs under a partition's lock, so one
session's work never stalls another's.
A command's answer tells the truth (``service.outcome``): once stored, it
is a success, with any failed follow-up named beside the result.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from domain import commands, errors
from domain.application import CtxStore
from domain.commands import Command
from domain.idempotency import PENDING, IdempotentReplay, Pending, Stored, check_same_request
from domain.policy import Policy
from domain.render import render_shape
from domain.rules.redact import mask_json
from domain.store_config import database_url, working_set_budget
from domain.summarizer import Summarizer, for_session, summarizer_from_env
from domain.tenancy import check_owner
from domain.tokens import check_tokenizer
from projections import queries as q
from projections import session_queries as sq
from projections.explain import explain
from projections.migrate import upgrade
from projections.processor import Processor
from projections.session_queries import SessionKey
from projections.store import ProjectionStore
from service.compaction import AUTO_COMPACT_AFTER, run_to_fold, summarize
from service.outcome import Executed
from service.partition_locks import AllPartitions
from service.partition_locks import is_id as _is_id

RENDER_CACHE = 256
SESSION_MAKERS = (commands.StartSession, commands.Branch)  # their result names a new session
log = logging.getLogger("ctxstore.runtime")


class Runtime:
    """One process's handle on the store: commands, catch-up, queries."""

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
    ) -> None:
        """``working_set``: nodes a process holds in memory before it lets the least
        recently used sessions go (``CTXSTORE_WORKING_SET``; 0 holds the whole store)."""
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
        self.processor = Processor(self.app, self.store, self.policy, budget or None)
        self.summarizer = summarizer or summarizer_from_env()
        self.auto_catch_up = auto_catch_up
        self.auto_compact = auto_compact
        self._lock = AllPartitions(self.processor)  # erasure: nothing may interleave
        self._rendered: OrderedDict[tuple[str, str, str, str, int, bool, int], dict[str, Any]] = (
            OrderedDict()
        )
        self.app.commit_resolver = self._latest_commit_of

    def close(self) -> None:
        self.store.close()
        self.app.close()

    # ------------------------------------------------------------ commands

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
        stored = self._claimed(idempotency)
        if stored is not None:
            return Executed(stored.result, replayed=True)
        token = PENDING.set(idempotency)
        try:
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
        try:
            self._follow(command, result)
        except Exception as exc:
            done.failed("catch_up", exc)
            return done
        if self.auto_compact and type(command) in AUTO_COMPACT_AFTER:
            session_id = str(getattr(command, "session_id", None))
            try:
                version = self._auto_compact(session_id)
            except Exception as exc:
                done.failed("compaction", exc)
            else:
                if version is not None and isinstance(result, tuple):
                    done.result = (result[0], version)  # the version the client must send next
        return done

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
        if self.app.idempotency_claim(pending) is not None:
            self.app.record_answer(pending, status, body, datetime.now(UTC))

    def _auto_compact(self, session_id: str) -> int | None:
        """Compact when the new head asks for it; the session's version afterwards."""
        if not self._asks_for_summary(session_id):
            return None
        done = self.compact_reporting(session_id)
        for step, failed in done.follow_up.items():  # the summary itself is stored
            log.warning("%s after auto-compaction failed: %s", step, failed)
        version: int = done.result["version"]
        return version

    def _asks_for_summary(self, session_id: str) -> bool:
        with self._locked(session_id) as projector:
            session = q.session_row(projector, session_id)
            commit_id = q.head_commit_id(projector, session)
            return bool(commit_id and projector.commits[commit_id].summary_request)

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
        with self.processor.parts[partition].lock:
            yield self._projector(partition)

    def _projector(self, partition: int = 0) -> Any:
        part = self.processor.parts[partition]
        if part.projector is None:  # dropped (an error, an erasure) since
            self.processor.catch_up(partition=partition)
        projector = part.projector
        assert projector is not None
        if projector.working is not None:
            projector.working.trim()  # what the last query brought in may go now
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

    # ------------------------------------------------------------- queries

    def tools(self, session_id: str, tenant: str | None = None) -> dict[str, Any]:
        with self._locked(session_id):
            _, session = self._owned(session_id, tenant)
            return {"session_id": session.session_id, "tools": session.tools}

    def sessions(self) -> list[dict[str, Any]]:
        """Every session, oldest first."""
        return self.sessions_page()[0]

    def sessions_page(
        self, limit: int | None = None, after: SessionKey | None = None,
        tenant: str | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
        """A page of ``tenant``'s sessions (every one for None), oldest first, and the
        next page's cursor (None at the end)."""
        if self.auto_catch_up:
            self.processor.catch_up()
        rows: dict[str, Any] = {}
        for part in self.processor.parts:  # a session's own partition has its newest row
            with part.lock:
                for sid, row in self._projector(part.index).dag.sessions.items():
                    if sid not in rows or rows[sid].version < row.version:
                        rows[sid] = row
        return sq.sessions(rows.values(), limit, after, tenant)

    def session_info(self, session_id: str, tenant: str | None = None) -> dict[str, Any]:
        with self._locked(session_id):
            projector, _ = self._owned(session_id, tenant)
            return sq.session_info(projector, self.store, session_id)

    def branch_nodes(self, session_id: str, head: str | None = None,
                     tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        with self._locked(session_id):
            projector, _ = self._owned(session_id, tenant)
            return sq.branch_nodes(projector, session_id, head)

    def head_commit(self, session_id: str, tenant: str | None = None) -> dict[str, Any]:
        with self._locked(session_id):
            projector, _ = self._owned(session_id, tenant)
            return q.head_commit(projector, self.store, session_id).to_json()

    def commit(self, session_id: str, commit_id: str,
               tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        with self._locked(session_id):
            projector, _ = self._owned(session_id, tenant)
            return q.load_commit(projector, self.store, session_id, commit_id).to_json()

    def rendered(self, session_id: str, shape: str = "neutral",
                 commit_id: str | None = None, cache: bool = False,
                 tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        with self._locked(session_id):
            projector, session = self._owned(session_id, tenant)
            cid = commit_id or q.head_commit_id(projector, session)
            if cid is None:
                raise errors.NotFound("the session has no commit yet: append a node first")
            # The request names the session's current model, and the answer its
            # current version (what a client sends as expected_version next), so
            # both are part of the key.
            # An erasure in another process rewrites commits in place: its resets too.
            key = (session.session_id, cid, shape, session.model, session.version, cache,
                   self.processor.resets)  # fmt: skip
            if key not in self._rendered:
                # A branch whose head is still its branch point renders the source's
                # commit; an explicitly named commit must belong to this session.
                owner = session.session_id if commit_id else ""
                commit = q.load_commit(projector, self.store, owner, cid)
                policy = self.processor.policy_of(commit.rules_version)
                fit = q.window_fit(projector, session, self.processor.policy_of, cid)
                self._rendered[key] = {
                    "session_id": session.session_id, "commit_id": cid,
                    "head_node_id": commit.head_node_id, "version": session.version,
                    "shape": shape, "over_window": fit["over_window"],
                    "shortfall": fit["shortfall"],
                    "request": render_shape(commit, shape, session.model, cache,
                                            policy.drop_summarized_tools),
                }  # fmt: skip
                if self.policy.redact_secrets:  # also items committed before it was on
                    self._rendered[key]["request"] = mask_json(self._rendered[key]["request"])[0]
                while len(self._rendered) > RENDER_CACHE:
                    self._rendered.popitem(last=False)
            return self._rendered[key]

    def timeline(self, session_id: str, tenant: str | None = None) -> list[dict[str, Any]]:
        return self.timeline_after(session_id, 0, tenant)[0]

    def timeline_after(self, session_id: str, after: int,
                       tenant: str | None = None) -> tuple[list[dict[str, Any]], int]:  # fmt: skip
        with self._locked(session_id):
            self._owned(session_id, tenant)
            return q.timeline_after(self.store, session_id, after)

    def explain(self, session_id: str, node_id: str,
                tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        with self._locked(session_id):
            projector, _ = self._owned(session_id, tenant)
            return explain(projector, self.store, session_id, node_id)

    def commit_transitions(self, session_id: str, commit_id: str,
                           tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        with self._locked(session_id):
            _, session = self._owned(session_id, tenant)
            return q.commit_transitions(self.store, session.session_id, commit_id)

    def occupancy(self, session_id: str, tenant: str | None = None) -> dict[str, Any]:
        with self._locked(session_id):
            projector, _ = self._owned(session_id, tenant)
            return q.occupancy(projector, self.store, session_id,
                               self.processor.policy_of)  # fmt: skip

    def budget(self, session_id: str, tenant: str | None = None) -> dict[str, Any]:
        with self._locked(session_id):
            projector, _ = self._owned(session_id, tenant)
            return q.budget(projector, session_id, self.processor.policy_of)

    def dag(self, session_id: str, tenant: str | None = None) -> dict[str, Any]:
        with self._locked(session_id):
            projector, _ = self._owned(session_id, tenant)
            return q.dag(projector, session_id)

    def session_version(self, session_id: str, tenant: str | None = None) -> int:
        with self._locked(session_id):
            version: int = self._owned(session_id, tenant)[1].version
            return version

    # ----------------------------------------------------------- compaction

    def compact(self, session_id: str, expected_version: int | None = None,
                tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Summarize the oldest foldable run under HEAD and record the summary."""
        result: dict[str, Any] = self.compact_reporting(
            session_id, expected_version, tenant=tenant
        ).result
        return result

    def compact_reporting(self, session_id: str, expected_version: int | None = None,
                          idempotency: Pending | None = None,
                          tenant: str | None = None) -> Executed:  # fmt: skip
        """``compact``, saying which follow-up failed; with a key, at most once per key.

        The session's own lock is held throughout, so its appends wait for
        the summary (which is computed for its head), but the process-wide
        lock only while reading the projection: a slow summarizer stalls no
        other session.
        """
        with self._locked(session_id):
            self._owned(session_id, tenant)  # another tenant's session is unknown, even replayed
        stored = self._claimed(idempotency)
        if stored is not None:
            return self._compacted_again(session_id, stored)
        with self.app.locks.hold(session_id):
            with self._locked(session_id):
                projector, session = self._owned(session_id, tenant)
                commit_id = q.head_commit_id(projector, session)
                if commit_id is None:
                    raise errors.NothingToCompact("the session has no commit yet")
                request = projector.commits[commit_id].summary_request
                items = projector.items_of(commit_id)
                covered = run_to_fold(items, request, True, session, self.policy)
            if not covered:
                raise errors.NothingToCompact("no foldable run outside the tail window")
            agg = self.app.session(session.session_id)
            summarizer = for_session(self.summarizer, agg.compaction)
            text = summarize(summarizer, covered, items, self.policy.summary_max_tokens,
                             redact=self.policy.redact_secrets)  # fmt: skip
            # The summary happens "at" the session's own latest time, not the wall
            # clock: a session driven by recorded times (an import, a replay) must
            # not see hours of idleness appear because compaction ran today.
            token = PENDING.set(idempotency)
            try:
                summary_id, version = self.app.record_summary(
                    session.session_id, [i.item_id for i in covered], text,
                    summarizer.name, commit_id, expected_version=expected_version,
                    at=agg.modified_on,
                )  # fmt: skip
            except IdempotentReplay as won:
                check_same_request(idempotency, won.stored)  # type: ignore[arg-type]
                return self._compacted_again(session_id, won.stored)
            finally:
                PENDING.reset(token)
        done = Executed({"session_id": session.session_id, "version": version,
                         "summary_id": summary_id, "covered": [i.item_id for i in covered],
                         "summarizer": summarizer.name, "computed_for": commit_id,
                         "commit_id": None})  # fmt: skip
        try:
            self.processor.catch_up(partition=self.processor.partition_of(session_id))
            with self._locked(session_id) as projector:
                done.result["commit_id"] = q.head_commit_id(
                    projector, q.session_row(projector, session_id)
                )
        except Exception as exc:
            done.failed("catch_up", exc)
        return done

    @staticmethod
    def _compacted_again(session_id: str, stored: Stored) -> Executed:
        summary_id, version = stored.result
        return Executed({"session_id": session_id, "version": version, "summary_id": summary_id},
                        replayed=True)  # fmt: skip
