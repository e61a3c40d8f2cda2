"""A session's projection kept in memory while the session is still being built.

An import saves a whole transcript in one atomic write, yet it must come out
as if its lines had been posted one by one: after each line that can grow
the context, the API compacts the new head if it asks for it, so the log
holds a ``SummaryRecorded`` right there, and every later commit builds on
it.  To know when the head asks and what for, the import runs the very
projection step the processor runs (``projections.projector.Projector``) on
the events the session has pending, in memory, before anything is saved.
Commit ids derive from event ids, which do not depend on when the events
are saved, so the summaries name the commits the live projection will make.
"""

from __future__ import annotations

from typing import Any

from domain.errors import DomainError
from domain.policy import Policy
from domain.session import Session
from domain.summarizer import Summarizer, SummarizerError, for_session
from projections import queries as q
from projections.projector import Projector
from projections.records import Outbox
from service.compaction import grows_context, run_to_fold, source_texts, summarize, summary_budget


class MemoryProjection:
    """The projection of one new, unsaved session (it may not branch, attach or merge)."""

    def __init__(self, policy: Policy) -> None:
        self.projector = Projector(lambda position: policy, lambda checkpoint: [])
        self.fed = 0  # how many of the session's pending events were applied

    def feed(self, agg: Session) -> list[type[Any]]:
        """Apply the session's events not applied yet; their types."""
        fed = agg.pending_events[self.fed :]
        for event in fed:
            self.fed += 1
            self.projector.apply(event, self.fed)
        self.projector.outbox = Outbox()  # rows stay in ``pending``: nothing is written
        return [type(event) for event in fed]

    def head_commit(self, agg: Session) -> str | None:
        return self.projector.commit_at(str(agg.id), agg.head) if agg.head else None


class ImportCompactor:
    """Compacts a session being imported exactly where the API would have."""

    def __init__(self, policy: Policy, summarizer: Summarizer) -> None:
        self.policy = policy
        self.memory = MemoryProjection(policy)
        self.summarizer = summarizer
        self.failures = 0  # summaries the summarizer could not give (the API said so too)

    def after(self, agg: Session) -> None:
        """Call after each command the import ran on ``agg``: compacts where the API would,
        after a command that recorded an event that can grow a context."""
        if not grows_context(self.memory.feed(agg)):
            return
        commit_id = self.memory.head_commit(agg)
        meta = self.memory.projector.commits.get(commit_id) if commit_id else None
        if commit_id is None or meta is None or meta.summary_request is None:
            return
        items = self.memory.projector.items_of(commit_id)
        covered = run_to_fold(items, meta.summary_request)
        if not covered:
            return
        summarizer = for_session(self.summarizer, agg.compaction)
        try:
            projector = self.memory.projector
            sources = source_texts(items, projector.texts_in(str(agg.id)))
            split = q.budget(projector, str(agg.id), lambda _: self.policy)
            room = summary_budget(int(split["history"]), self.policy)
            text = summarize(summarizer, covered, items, self.policy.summary_max_tokens,
                             redact=self.policy.redact_secrets, sources=sources.get,
                             max_tokens=room)  # fmt: skip
        except SummarizerError:
            self.failures += 1  # the line stands; the next one asks again, as over HTTP
            return
        at: Any = agg.modified_on
        try:
            agg.record_summary([i.item_id for i in covered], text, summarizer.name,
                               commit_id, at=at)  # fmt: skip
        except DomainError:
            return
        self.memory.feed(agg)
