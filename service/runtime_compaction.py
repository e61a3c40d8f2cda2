"""The runtime's compaction: summarize the oldest foldable run under a session's head.

Asked for (``compact``), or after a command whose new head asks for a
summary (``_auto_compact``, a command's follow-up).
"""

from __future__ import annotations

import logging
from typing import Any

from domain import errors
from domain.idempotency import PENDING, IdempotentReplay, Pending, Stored, check_same_request
from domain.summarizer import for_session
from projections import queries as q
from service.compaction import run_to_fold, source_texts, summarize, summary_budget
from service.outcome import Executed
from service.runtime_core import RuntimeCore
from telemetry import probes

log = logging.getLogger("ctxstore.runtime")


class Compaction(RuntimeCore):
    """Summaries: on request, and as a command's follow-up."""

    def compact(self, session_id: str, expected_version: int | None = None,
                tenant: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Summarize the oldest foldable run under HEAD and record the summary."""
        result: dict[str, Any] = self.compact_reporting(
            session_id, expected_version, tenant=tenant
        ).result
        return result

    def compact_reporting(self, session_id: str, expected_version: int | None = None,
                          idempotency: Pending | None = None, tenant: str | None = None,
                          trigger: str = "request") -> Executed:  # fmt: skip
        """``compact``, saying which follow-up failed; with a key, at most once per key.
        ``trigger``: ``request`` or ``auto`` (a command's follow-up), for the metrics."""
        try:
            done = self._compact(session_id, expected_version, idempotency, tenant)
        except errors.NothingToCompact:
            probes.compaction(trigger, "nothing_to_compact")
            raise
        except Exception:
            probes.compaction(trigger, "failed")
            raise
        if done.replayed:
            probes.compaction(trigger, "replayed")
        else:
            probes.compaction(trigger, "stored", done.folded_tokens)
        return done

    def _compact(self, session_id: str, expected_version: int | None,
                 idempotency: Pending | None, tenant: str | None) -> Executed:  # fmt: skip
        """``compact_reporting``'s work.

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
                sources = source_texts(items, projector.texts_in(session.session_id))
                history = q.budget(projector, session.session_id, self.processor.policy_of)
                room = summary_budget(int(history["history"]), self.policy)
            if not covered:
                raise errors.NothingToCompact("no foldable run outside the tail window")
            agg = self.app.session(session.session_id)
            summarizer = for_session(self.summarizer, agg.compaction)
            text = summarize(summarizer, covered, items, self.policy.summary_max_tokens,
                             redact=self.policy.redact_secrets, sources=sources.get,
                             max_tokens=room)  # fmt: skip
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
        done.folded_tokens = sum(i.tokens for i in covered)
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

    def _auto_compact(self, session_id: str) -> int | None:
        """Compact when the new head asks for it; the session's version afterwards."""
        if not self._asks_for_summary(session_id):
            return None
        done = self.compact_reporting(session_id, trigger="auto")
        for step, failed in done.follow_up.items():  # the summary itself is stored
            log.warning("%s after auto-compaction failed: %s", step, failed)
        version: int = done.result["version"]
        return version

    def _asks_for_summary(self, session_id: str) -> bool:
        """Right after the command's own catch-up (``_follow``), so no read of the log
        first: whatever another process appended since, its own follow-up judges."""
        with self._holding(self.processor.partition_of(session_id)) as projector:
            session = q.session_row(projector, session_id)
            commit_id = q.head_commit_id(projector, session)
            return bool(commit_id and projector.commits[commit_id].summary_request)
