"""Erase a session for good: its events, claims, projections, and what quotes it elsewhere.

Hard deletion (the README's "Erasure" says why not crypto-shredding): in
one transaction on the event store, the session's events and snapshots, the
events of every branch of it (a branch's history *is* the source's chain),
and the id claims of their nodes are deleted; summaries other sessions
recorded over copies of that content get a tombstone text in place; and an
``Erasure`` record (who, when, what; no content) is inserted.  Then every
projection is rebuilt from the remaining log, so the live tables are by
construction what a later rebuild gives (other sessions' attach and merge
copies turn into tombstones, ``projections/erasure.py``), and the database
files are compacted so no freed page still holds the content: ``VACUUM``
and a WAL checkpoint on SQLite, ``VACUUM (FULL)`` of the touched tables on
PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from sqlalchemy import Connection, bindparam, select, text

from domain import events as ev
from domain.erasure import ERASURE_TOPIC, erasure_event, quotes, summary_tombstone
from domain.node_claim import claim_id, legacy_claim_id
from projections import tables as t
from projections.projector import Projector
from projections.store import WRITE_OPTION
from service.runtime import Runtime

log = logging.getLogger("ctxstore.erasure")


def _branches(projector: Projector, session_id: str) -> list[str]:
    """``session_id`` and every session branched from it, at any depth, oldest first."""
    found = [session_id]
    for sid in sorted(projector.dag.sessions, key=lambda s: projector.dag.sessions[s].created_at):
        branched = projector.dag.sessions[sid].branched_from
        if sid not in found and branched and branched["session_id"] in found:
            found.append(sid)
    return found


def _referrers(structural: list[tuple[str, str, dict[str, Any]]], erased: set[str]) -> list[str]:
    """Sessions that attached or merged erased content, directly or through another one.

    ``structural`` is every attach and merge node as (session, role, meta).
    """
    sources = set(erased)
    referrers: list[str] = []
    changed = True
    while changed:
        changed = False
        for session_id, role, meta in structural:
            if session_id in sources:
                continue
            if role == "attach":
                named = [meta.get("source_session", "")]
            else:
                named = [str(p.get("session_id", session_id)) for p in meta["peers"]]
            if any(n in sources for n in named):
                sources.add(session_id)
                referrers.append(session_id)
                changed = True
    return sorted(set(referrers))


class Eraser:
    """Runs one erasure on a runtime (holding its lock throughout)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.app = runtime.app
        recorder: Any = self.app.recorder
        snapshots: Any = self.app.snapshots.recorder if self.app.snapshots else None
        self.events_table: str = recorder.events_table_name
        self.snapshots_table: str | None = snapshots.events_table_name if snapshots else None
        self.is_sqlite = runtime.store.is_sqlite

    def erase(self, session_id: str, by: str, at: datetime | None = None,
              tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Erase ``session_id``; a session of a tenant other than ``tenant`` is unknown (404)."""
        runtime = self.runtime
        with runtime._lock:  # noqa: SLF001  (no command or catch-up may interleave)
            owned = self.app.session(session_id, tenant=tenant)  # SessionNotFound: 404
            root = str(owned.id)
            runtime.catch_up()
            projector = runtime._projector()  # noqa: SLF001
            erased = _branches(projector, root)
            nodes, structural = self._nodes(erased)  # from the tables: memory may hold a few
            referrers = _referrers(structural, set(erased))
            rewrites = self._summary_rewrites(projector, referrers, {n for _, n in nodes}, erased)
            events = sum(len(self.app.events_of(UUID(sid))) for sid in erased)
            record = {
                "session_id": root, "erased_sessions": erased, "events": events,
                "nodes": len(nodes), "referrers": referrers,
                "tombstoned": [{"session_id": sid, "summary_id": e.summary_id}
                               for sid, e in rewrites],
                "by": by, "tenant": owned.tenant,
            }  # fmt: skip
            when = at or datetime.now(UTC)
            versions = {sid: self.app.session(sid).version for sid in erased}
            audit = [self.app.mapper.to_stored_event(erasure_event(sid, versions[sid] + 1, when,
                                                                   record))
                     for sid in erased]  # fmt: skip
            with runtime.store.engine.connect() as conn:
                conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    self._delete(conn, erased, nodes, rewrites, audit)
            for sid in {*erased, *(sid for sid, _ in rewrites)}:
                self.app._evict(UUID(sid))  # noqa: SLF001
            runtime._rendered.clear()  # noqa: SLF001
            runtime.store.truncate()  # every projection again, from what is left
            runtime.processor.projector = None
            runtime.catch_up()
            compacted = self._compact()
        return {**record, "erased_at": when.isoformat(), "compacted": compacted}

    # ------------------------------------------------------------- planning

    def _nodes(self, erased: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str, Any]]]:
        """The erased sessions' (session, node id) pairs, and every attach and merge node."""
        c = t.nodes.c
        with self.runtime.store.engine.connect() as conn:
            found = conn.execute(select(c.session_id, c.node_id).where(c.session_id.in_(erased)))
            nodes = sorted((r.session_id, r.node_id) for r in found)
            rows = conn.execute(
                select(c.session_id, c.role, c.meta)
                .where(c.role.in_(("attach", "merge")))
                .order_by(c.notification_id)
            )
            structural = [(r.session_id, r.role, json.loads(r.meta)) for r in rows]  # fmt: skip
        return nodes, structural

    def _summary_rewrites(
        self, projector: Projector, referrers: list[str], nodes: set[str], erased: list[str]
    ) -> list[tuple[str, Any]]:
        """The summaries other sessions recorded over copies of the erased content."""
        names = set(nodes)  # erased node ids, then tainted summary ids as they are found
        summaries = [(sid, e) for sid in referrers for e in self.app.events_of(UUID(sid))
                     if isinstance(e, ev.SummaryRecorded)]  # fmt: skip
        tainted: dict[tuple[str, int], tuple[str, Any]] = {}
        changed = True
        while changed:  # a summary over a copy of a tainted summary is tainted too
            changed = False
            for sid, event in summaries:
                key = (sid, event.originator_version)
                if key in tainted or not self._quotes(projector, event, names):
                    continue
                tainted[key] = (sid, event)
                names.add(event.summary_id)
                changed = True
        text = summary_tombstone(erased)
        return [(sid, dataclasses.replace(e, text=text)) for sid, e in tainted.values()]

    @staticmethod
    def _quotes(projector: Projector, event: Any, names: set[str]) -> bool:
        if any(quotes(c, names) for c in event.covered):
            return True
        if event.commit not in projector.commits:
            return False
        by_id = {i.item_id: i for i in projector.items_of(event.commit)}
        return any((item := by_id.get(c)) is not None and item.source_node_id in names
                   for c in event.covered)  # fmt: skip

    # ------------------------------------------------------------- writing

    def _key(self, uuid: UUID | str) -> Any:
        uuid = uuid if isinstance(uuid, UUID) else UUID(uuid)
        return uuid.hex if self.is_sqlite else uuid

    def _delete(self, conn: Connection, erased: list[str], nodes: list[tuple[str, str]],
                rewrites: list[tuple[str, Any]], audit: list[StoredEvent]) -> None:  # fmt: skip
        if self.is_sqlite:
            conn.exec_driver_sql("PRAGMA secure_delete=ON")  # freed cells are zeroed
        else:  # as the recorder does: notification ids stay in commit order
            conn.exec_driver_sql(f"LOCK TABLE {self.events_table} IN EXCLUSIVE MODE")
        # a node's claim, and the store-wide one older versions saved for its id
        claims = [c for sid, n in nodes for c in (claim_id(sid, n), legacy_claim_id(n))]
        ids = [self._key(UUID(sid)) for sid in erased] + [self._key(c) for c in claims]
        tables = [self.events_table] + ([self.snapshots_table] if self.snapshots_table else [])
        for table in tables:
            delete = text(f"DELETE FROM {table} WHERE originator_id IN :ids")
            for chunk in _chunks(ids, 500):
                conn.execute(delete.bindparams(bindparam("ids", expanding=True)), {"ids": chunk})
        update = text(f"UPDATE {self.events_table} SET state = :state "
                      "WHERE originator_id = :id AND originator_version = :version")  # fmt: skip
        for _, event in rewrites:
            stored = self.app.mapper.to_stored_event(event)
            conn.execute(update, {"state": stored.state, "id": self._key(stored.originator_id),
                                  "version": stored.originator_version})  # fmt: skip
        insert = text(f"INSERT INTO {self.events_table} "
                      "(originator_id, originator_version, topic, state) "
                      "VALUES (:id, :version, :topic, :state)")  # fmt: skip
        for stored in audit:  # after the deletes: each takes its erased session's next version
            conn.execute(insert, {"id": self._key(stored.originator_id),
                                  "version": stored.originator_version,
                                  "topic": stored.topic, "state": stored.state})  # fmt: skip

    def _compact(self) -> bool:
        """Leave no freed page holding erased content; whether that fully succeeded."""
        try:
            if self.is_sqlite:
                database = self.runtime.store.engine.url.database
                assert database is not None
                with sqlite3.connect(database, timeout=30, isolation_level=None) as raw:
                    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    raw.execute("VACUUM")
                    busy: int = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                raw.close()
                return busy == 0
            names = [self.events_table, *([self.snapshots_table] if self.snapshots_table else []),
                     *(table.name for table in t.PROJECTION_TABLES)]  # fmt: skip
            with self.runtime.store.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                conn.exec_driver_sql("SET lock_timeout = 30000")
                settled = _wait_for_older_snapshots(conn)
                conn.exec_driver_sql(f"VACUUM (FULL) {', '.join(names)}")
            return settled
        except Exception:
            log.exception("compacting the database after an erasure failed; run VACUUM yourself")
            return False


def _wait_for_older_snapshots(conn: Connection, timeout: float = 30.0) -> bool:
    """Wait until no transaction on the server can still see the deleted rows.

    ``VACUUM (FULL)`` copies a deleted row into the new table file while any
    transaction older than the delete is running, on any database of the
    server (observed: another database's ``CREATE DATABASE``), so the
    content would survive on disk.  False if one stayed past ``timeout``.
    """
    mark = conn.exec_driver_sql("SELECT xid(pg_current_xact_id())::text").scalar()
    older = text("SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                 "AND (age(backend_xmin) >= age(CAST(:mark AS xid)) "
                 "OR age(backend_xid) >= age(CAST(:mark AS xid)))")  # fmt: skip
    deadline = time.monotonic() + timeout
    while conn.execute(older, {"mark": mark}).scalar():
        if time.monotonic() > deadline:
            log.warning("a transaction older than the erasure outlived %s s", timeout)
            return False
        time.sleep(0.05)
    return True


def _chunks(values: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def erasures(runtime: Runtime, tenant: str | None = None) -> list[dict[str, Any]]:
    """Every erasure record of ``tenant`` (None: all), oldest first (the audit trail)."""
    notes = runtime.app.recorder.select_notifications(start=1, limit=1_000_000,
                                                      topics=[ERASURE_TOPIC])  # fmt: skip
    out = []
    for note in notes:
        event: Any = runtime.app.mapper.to_domain_event(note)
        if event.session_id != str(event.originator_id):
            continue  # a branch erased along with the session that names it
        if tenant is not None and event.tenant != tenant:
            continue
        out.append({
            "session_id": event.session_id, "erased_sessions": event.erased_sessions,
            "events": event.events, "nodes": event.nodes, "referrers": event.referrers,
            "tombstoned": event.tombstoned, "by": event.by, "tenant": event.tenant,
            "erased_at": event.timestamp.isoformat(),
        })  # fmt: skip
    return out
