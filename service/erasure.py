"""Erase a session (or a tenant) for good: its events, claims, projections, and copies elsewhere.

Hard deletion (the README's "Erasure" says why not crypto-shredding), in
ONE transaction on the store: the session's events and snapshots, the
events of every branch of it (a branch's history *is* the source's chain),
the id claims of their nodes and the idempotency keys' claims of their
commands (with each answer sent; expired claims of any session go too) are
deleted; summaries other sessions recorded over copies of that content get
a tombstone text in place; an
``Erasure`` record (who, when, what; no content) is inserted; and the
projection rows of the erased sessions, and of the sessions whose rows
depended on them, are dropped and those sessions' remaining events
projected again (``projections/reproject.py``), so the live tables are what
a rebuild gives without rebuilding the other sessions.  Then the database
files are compacted so no freed page still holds the content.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import select

from domain import events as ev
from domain.erasure import (
    ERASURE_TOPIC,
    TenantNotConfirmed,
    erasure_event,
    quotes,
    summary_tombstone,
)
from domain.errors import SessionNotFound
from domain.node_claim import claim_id, legacy_claim_id
from projections import reproject as rp
from projections import tables as t
from projections import tracking
from projections.erasure_watch import forget_erased_content
from projections.projector import Projector
from projections.records import SessionRow
from projections.session_rows import SessionRows
from projections.store import WRITE_OPTION
from projections.working_set import DEFAULT_BUDGET
from service.erasure_store import EventTables
from service.runtime import Runtime

RETRIES = 5  # another process stored events between the plan and the transaction


class _Moved(Exception):
    """The log moved on since the erasure was planned: plan again."""


def _branches(projector: Projector, session_id: str) -> list[str]:
    """``session_id`` and every session branched from it, at any depth, oldest first."""
    found = [session_id]
    for sid in sorted(projector.dag.sessions, key=lambda s: projector.dag.sessions[s].created_at):
        branched = projector.dag.sessions[sid].branched_from
        if sid not in found and branched and branched["session_id"] in found:
            found.append(sid)
    return found


def _referrers(structural: list[rp.Structural], erased: set[str]) -> list[str]:
    """Sessions that attached or merged erased content, directly or through another one."""
    sources = set(erased)
    changed = True
    while changed:
        changed = False
        for node in structural:
            if node.session_id not in sources and any(s in sources for s, _ in node.peers()):
                sources.add(node.session_id)
                changed = True
    return sorted(sources - erased)


@dataclasses.dataclass
class _Plan:
    groups: dict[str, list[str]]  # root -> it and its branches
    nodes: dict[str, list[str]]  # erased session -> its node ids
    structural: list[rp.Structural]
    rewrites: list[tuple[str, Any]]
    reprojected: list[str]
    position: int

    @property
    def erased(self) -> list[str]:
        return [sid for group in self.groups.values() for sid in group]


class Eraser:
    """Runs one erasure on a runtime (holding its lock throughout)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.app = runtime.app
        self.tables = EventTables(runtime)

    def erase(self, session_id: str, by: str, at: datetime | None = None,
              tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Erase ``session_id``; a session of a tenant other than ``tenant`` is unknown (404)."""
        with self.runtime._lock:  # noqa: SLF001  (no command or catch-up may interleave)
            owned = self.app.session(session_id, tenant=tenant)  # SessionNotFound: 404
            sid = str(owned.id)
            records, extra = self._erase(lambda p: [sid] if sid in p.dag.sessions else [], by, at)
            if not records:  # erased by another process meanwhile
                raise SessionNotFound(f"session {session_id} not found")
            return {**records[0], **extra}

    def erase_tenant(self, tenant: str, by: str, at: datetime | None = None,
                     confirm: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Erase every session of ``tenant``: one audit record per session erased
        (with its branches); none again once the tenant holds no session.

        ``confirm`` (the HTTP route's) must repeat the tenant's name.  Its API
        keys stay: erasure is of content, and revoking is ``ctxstore keys revoke``.
        """
        if confirm is not None and confirm != tenant:
            raise TenantNotConfirmed(f"to erase every session of tenant {tenant!r}, "
                                     f"pass confirm={tenant}")  # fmt: skip
        with self.runtime._lock:  # noqa: SLF001

            def roots(projector: Projector) -> list[str]:
                return sorted(sid for sid, s in projector.dag.sessions.items()
                              if s.tenant == tenant and not s.branched_from)  # fmt: skip

            records, extra = self._erase(roots, by, at)
            return {"tenant": tenant, "erasures": records, **extra}

    # ------------------------------------------------------------- running

    def _erase(self, roots: Callable[[Projector], list[str]], by: str,
               at: datetime | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
        runtime = self.runtime
        when = at or datetime.now(UTC)
        for attempt in range(RETRIES):
            runtime.catch_up()
            projector, position = self._reader()
            plan = self._plan(projector, roots(projector), position)
            if not plan.groups:
                return [], {"erased_at": when.isoformat(), "compacted": True, "reprojected": 0}
            records = [self._record(plan, root, by, projector) for root in plan.groups]
            try:
                self._write(plan, records, when)
                break
            except _Moved:
                if attempt == RETRIES - 1:
                    raise
        for sid in {*plan.erased, *(sid for sid, _ in plan.rewrites)}:
            self.app._evict(UUID(sid))  # noqa: SLF001
        runtime._rendered.clear()  # noqa: SLF001
        forget_erased_content(self.app.recorder)  # states read, calls parsed, of the erased
        runtime.processor.projector = None  # its memory held erased rows: reload
        runtime.processor.resets += 1
        compacted = self.tables.compact()
        out = [{**r, "erased_at": when.isoformat()} for r in records]
        return out, {"erased_at": when.isoformat(), "compacted": compacted,
                     "reprojected": len(plan.reprojected)}  # fmt: skip

    def _record(self, plan: _Plan, root: str, by: str, projector: Projector) -> dict[str, Any]:
        group = plan.groups[root]
        rewritten = [{"session_id": sid, "summary_id": e.summary_id} for sid, e in plan.rewrites
                     if any(s in e.text for s in group)]  # fmt: skip
        return {
            "session_id": root, "erased_sessions": group,
            "events": sum(len(self.app.events_of(UUID(sid))) for sid in group),
            "nodes": sum(len(plan.nodes.get(sid, ())) for sid in group),
            "referrers": [s for s in _referrers(plan.structural, set(group))
                          if s not in plan.erased],
            "tombstoned": rewritten, "by": by,
            "tenant": projector.dag.sessions[root].tenant,
        }  # fmt: skip

    def _write(self, plan: _Plan, records: list[dict[str, Any]], when: datetime) -> None:
        """Everything in one transaction: the log, the audit, the projection rows."""
        runtime, tables = self.runtime, self.tables
        audit = []
        for record in records:
            for sid in record["erased_sessions"]:
                version = self.app.session(sid).version + 1
                audit.append(self.app.mapper.to_stored_event(erasure_event(sid, version, when,
                                                                           record)))  # fmt: skip
        erased = plan.erased
        # a node's claim, and the store-wide one older versions saved for its id (when
        # this session saved it: a newer session may use an id an old one claimed)
        claims = [claim_id(sid, n) for sid in erased for n in plan.nodes.get(sid, ())]
        legacy: dict[UUID, set[str]] = {}
        for sid in erased:
            for n in plan.nodes.get(sid, ()):
                legacy.setdefault(legacy_claim_id(n), set()).add(sid)
        with runtime.store.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                top = tables.lock(conn)
                # every partition's row, each caught up to where the plan was made
                positions = tracking.lock_all(conn)
                if top != plan.position or any(p != top for p in positions.values()):
                    raise _Moved
                partitions = rp.partitions_of(conn, plan.reprojected)
                keys = rp.tool_keys(conn, erased + plan.reprojected)
                claims += tables.claims_of(conn, legacy)
                claims += tables.key_claims(conn, set(erased),
                                            runtime.clock() - runtime.idempotency_ttl)  # fmt: skip
                tables.delete(conn, [UUID(sid) for sid in erased] + claims)
                for _, event in plan.rewrites:
                    tables.rewrite(conn, self.app.mapper.to_stored_event(event))
                newest = tables.insert(conn, audit, top)
                mine = range(top + 1, newest + 1)  # the erasure records, under the table lock
                rp.drop(conn, erased + plan.reprojected)
                notes = tables.notifications(conn, plan.reprojected)
                rp.reproject(runtime.store, conn, runtime.processor.policy_at, notes,
                             self.app.mapper.to_domain_event, newest,
                             runtime.processor.budget or DEFAULT_BUDGET,
                             partition_of=lambda sid: partitions.get(sid, 0))  # fmt: skip
                rp.drop_unused_tool_sets(conn, keys)
        runtime.processor.erasures.record(mine)

    # ------------------------------------------------------------- planning

    def _reader(self) -> tuple[Projector, int]:
        """A projector that sees every session, and the position it is as of.

        With one partition, the runtime's own.  With several, each partition's
        projector holds its own sessions only, but an erasure follows branches,
        attaches and merges across partitions: it reads them all from the
        committed rows (a working set, as ``reproject`` does).  The position is
        the partitions' lowest; the write refuses the plan unless every
        partition and the log are exactly there.
        """
        runtime = self.runtime
        if runtime.processor.partitions == 1:
            projector = runtime._projector()  # noqa: SLF001
            return projector, projector.position
        position = min(runtime.store.positions().values(), default=0)
        store = runtime.store
        rows = SessionRows(store)
        projector = Projector(runtime.processor.policy_at, store.commit_rows, rows,
                              runtime.processor.budget or DEFAULT_BUDGET)  # fmt: skip
        assert projector.working is not None
        with store.engine.connect() as conn:
            for row in store.rows_after(t.sessions, 0, conn):
                projector.dag.add_session(SessionRow.from_row(row))
        projector.dag.counts.update(rows.node_counts(0))
        projector.position = position
        return projector, position

    def _plan(self, projector: Projector, roots: list[str], position: int) -> _Plan:
        groups: dict[str, list[str]] = {}
        for root in roots:
            if not any(root in g for g in groups.values()):
                groups[root] = _branches(projector, root)
        erased = [sid for g in groups.values() for sid in g]
        c = t.nodes.c
        nodes: dict[str, list[str]] = {}
        with self.runtime.store.engine.connect() as conn:
            for chunk in (erased[i : i + 500] for i in range(0, len(erased), 500)):
                query = select(c.session_id, c.node_id).where(c.session_id.in_(chunk))
                for sid, node_id in conn.execute(query.order_by(c.node_id)):
                    nodes.setdefault(sid, []).append(node_id)
            rows = conn.execute(
                select(c.session_id, c.role, c.meta, c.notification_id)
                .where(c.role.in_(("attach", "merge")))
                .order_by(c.notification_id)
            )
            structural = [rp.Structural(r.session_id, r.role, json.loads(r.meta),
                                        r.notification_id) for r in rows]  # fmt: skip
            reprojected = rp.scope(conn, projector.dag.sessions, structural, set(erased))
        # an erased node as copies in other sessions name it: a bare id is ambiguous
        # there (another session may own a node of that id), the key is not
        names = {f"{sid}/{n}" for sid, ids in nodes.items() for n in ids}
        rewrites = self._summary_rewrites(projector, reprojected, names, erased)
        return _Plan(groups, nodes, structural, rewrites, reprojected, position)

    def _summary_rewrites(
        self, projector: Projector, sessions: list[str], nodes: set[str], erased: list[str]
    ) -> list[tuple[str, Any]]:
        """The summaries other sessions recorded over copies of the erased content."""
        keys = set(nodes)  # the erased nodes' keys (``session/node_id``)
        names: set[str] = set()  # the tainted summaries' ids (unique store-wide), as found
        summaries = [(sid, e) for sid in sessions for e in self.app.events_of(UUID(sid))
                     if isinstance(e, ev.SummaryRecorded)]  # fmt: skip
        tainted: dict[tuple[str, int], tuple[str, Any]] = {}
        changed = True
        while changed:  # a summary over a copy of a tainted summary is tainted too
            changed = False
            for sid, event in summaries:
                key = (sid, event.originator_version)
                if key in tainted or not self._quotes(projector, event, keys, names):
                    continue
                tainted[key] = (sid, event)
                names.add(event.summary_id)
                changed = True
        text = summary_tombstone(erased)
        return [(sid, dataclasses.replace(e, text=text)) for sid, e in tainted.values()]

    @staticmethod
    def _quotes(projector: Projector, event: Any, keys: set[str], summaries: set[str]) -> bool:
        """Whether ``event`` summarized a copy of an erased node or of a tainted summary.

        Copies are told by the node their item names (``source_node_id``, the
        erased node's key), never by a bare id, which another session's own
        node may share; summary ids are unique, so a copy's id suffix will do.
        """
        if any(quotes(c, summaries) for c in event.covered):
            return True
        if event.commit not in projector.commits:
            return False
        by_id = {i.item_id: i for i in projector.items_of(event.commit)}
        return any((item := by_id.get(c)) is not None and item.source_node_id in keys
                   for c in event.covered)  # fmt: skip


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
