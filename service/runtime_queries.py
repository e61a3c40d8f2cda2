"""The runtime's reads: each under its session's partition lock, for its tenant.

Another tenant's session is unknown (``RuntimeCore._owned``); rendered
requests are cached per session version and rules (``RENDER_CACHE``).
"""

from __future__ import annotations

import logging
from typing import Any

from domain import errors
from domain.catalogue import window_warnings
from domain.native_blocks import left_out
from domain.provider_compaction import folds
from domain.recall_query import matched_in_secret, recall_terms
from domain.render import load_shapes, render_shape
from domain.rules.redact import blank, mask, mask_json
from domain.tool_specs import recall_listed
from projections import queries as q
from projections import session_queries as sq
from projections.explain import explain
from projections.recall import recall
from projections.session_queries import SessionKey
from service.runtime_core import RuntimeCore
from telemetry import probes, tracing

RENDER_CACHE = 256
WARM_BACKLOG = 1_000  # events a server catches up as it starts (``warm_projection``)


NEXT_CAP = 1_000  # characters of a hit's following node: its answer, not a transcript


log = logging.getLogger("ctxstore.runtime")


class Queries(RuntimeCore):
    """What a client reads: sessions, commits, renders, timelines, budgets."""

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
            with self._holding(part.index) as projector:
                for sid, row in projector.dag.sessions.items():
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

    def warm_reads(self) -> None:
        """What a server runs as it starts, so its first read is not also its slowest:
        every shape's renderer imported, a cold read's statements compiled.  Only a
        head start: whatever fails here is logged, and the first read says it again."""
        try:
            load_shapes()
            q.warm_reads(self.store)
        except Exception:  # never keep a server from starting (/health, DELETE) over it
            log.warning("warming the read path failed", exc_info=True)

    def warm_projection(self) -> None:
        """Catch up as a server starts, when at most ``WARM_BACKLOG`` events follow the
        furthest-behind partition's position (one query each for the two numbers).

        Catching up builds each partition's projector (its tracking rows, which
        sessions it holds, the catch-up's own statements): on PostgreSQL that was
        half of a fresh server's first read (issue 29).  A server runs it on a
        thread and waits for it only so long (``api.app.WARM_UP_HEAD_START``): a
        large store, or an erasure in another process holding every partition's
        lock, must not hold start-up.  A longer log tail (the replay after a
        revision that empties the projections) is left to the reads and workers,
        as before.  Only a head start: whatever fails is logged, and the next
        catch-up tries again."""
        try:
            head = self.app.recorder.max_notification_id() or 0
            positions = self.store.positions()
            lowest = min((positions.get(p, 0) for p in range(self.processor.partitions)),
                         default=0)  # fmt: skip
            if head - lowest <= WARM_BACKLOG:
                self.catch_up()
        except Exception:
            log.warning("catching up at start failed", exc_info=True)

    def rendered(self, session_id: str, shape: str = "neutral",
                 commit_id: str | None = None, cache: bool = False,
                 tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        with tracing.span("ctxstore.render", ctxstore__shape=shape) as current:
            answer, share, tokens = self._rendered_at(session_id, shape, commit_id, cache, tenant)
            probes.window_share(share)
            if current is not None:  # traced: how much a prompt cache could reuse
                messages, prefix = self._prefixes.shared(session_id, shape, answer["request"])
                tracing.set_attributes(current, ctxstore__render__tokens=tokens,
                                       ctxstore__render__window_share=share,
                                       ctxstore__render__messages=messages,
                                       ctxstore__render__prefix_messages=prefix)  # fmt: skip
            return answer

    def _rendered_at(self, session_id: str, shape: str, commit_id: str | None, cache: bool,
                     tenant: str | None) -> tuple[dict[str, Any], float, int]:  # fmt: skip
        with self._locked(session_id):
            projector, session = self._owned(session_id, tenant)
            cid = commit_id or q.head_commit_id(projector, session)
            if cid is None:
                raise errors.NotFound("the session has no commit yet: append a node first")
            # The request names the session's current model, and the answer its
            # current version (what a client sends as expected_version next), so
            # both are part of the key.
            # An erasure in another process rewrites commits in place: its resets, and
            # the erasures learnt of (a dropped projector's new one holds no reset), too.
            key = (session.session_id, cid, shape, session.model, session.version, cache,
                   self.processor.resets, self.processor.erasures.found)  # fmt: skip
            if key not in self._rendered:
                # A branch whose head is still its branch point renders the source's
                # commit; an explicitly named commit must belong to this session.
                owner = session.session_id if commit_id else ""
                # Read only, under the session's lock: the warm items, not copies.
                commit = q.load_commit(projector, self.store, owner, cid, copies=False)
                policy = self.processor.policy_of(commit.rules_version)
                fit, tokens, share = q.window_fit_share(
                    projector, session, self.processor.policy_of, cid, commit.items
                )
                self._shares[key] = (share, tokens)
                self._rendered[key] = {
                    "session_id": session.session_id, "commit_id": cid,
                    "head_node_id": commit.head_node_id, "version": session.version,
                    "shape": shape, "over_window": fit["over_window"],
                    "shortfall": fit["shortfall"], "left_out": left_out(commit, shape),
                    "folded": folds(commit, shape),
                    "warnings": window_warnings(session.model, session.context_window),
                    "request": render_shape(commit, shape, session.model, cache,
                                            policy.drop_summarized_tools,
                                            recall_listed(session.compaction, policy.recall_tool)),
                }  # fmt: skip
                if self.policy.redact_secrets:  # also items committed before it was on
                    self._rendered[key]["request"] = mask_json(self._rendered[key]["request"])[0]
                while len(self._rendered) > RENDER_CACHE:
                    self._rendered.popitem(last=False)
                while len(self._shares) > RENDER_CACHE:
                    self._shares.popitem(last=False)
            share, tokens = self._shares.get(key, (0.0, 0))
            return self._rendered[key], share, tokens

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

    def recall(self, session_id: str, q: str, limit: int = 5, hidden: bool = False,
               tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        """``{"hits": [...]}``: the ``limit`` nodes under the head whose original content
        best matches ``q``, whatever their items' state (``projections.recall``); with
        ``hidden`` only those the head does not show in full."""
        if not 1 <= limit <= 50:
            raise errors.InvalidCommand("limit must be 1..50", limit=limit)
        redact = self.policy.redact_secrets
        with self._locked(session_id):
            projector, session = self._owned(session_id, tenant)
            # masked hits found only by a secret's words are dropped below: ask for spares
            found = recall(projector, self.store, session, q, 50 if redact else limit,
                           hidden=hidden)  # fmt: skip
        terms, hits = recall_terms(q), []
        for hit in found["hits"]:
            if redact:  # matched on the original, shown masked
                if matched_in_secret(hit["text"], blank(hit["text"]), terms):
                    continue  # else a search would confirm a guessed secret
                hit["text"] = mask(hit["text"])[0]
                hit["next_text"] = mask(hit["next_text"])[0]
            hit["next_text"] = hit["next_text"][:NEXT_CAP]  # cut after masking: no half secret
            hits.append(hit)
        return {**found, "hits": hits[:limit]}

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
