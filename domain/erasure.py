"""Erasure: the audit record an erased session leaves, and the tombstones it leaves elsewhere.

Erasing a session removes its events from the log for good (see the README's
"Erasure" section for why hard deletion and not crypto-shredding).  What
stays is this record: one ``Erasure`` aggregate per erased session, saved in
the same transaction as the deletion, saying who erased what and when, and
nothing of the content (ids and counts only), stored as the erased
session's own next event (``erasure_event``).  Projections skip it.

Other sessions that staged (attach) or merged the erased content keep their
own events, which carry no content of it; when the projection meets an
attach or merge peer whose session no longer exists, it shows a tombstone
item instead (``projections/erasure.py``), live and in a rebuild alike.  A
summary another session recorded over such copies *does* quote the erased
content, so its stored text is replaced by ``summary_tombstone``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.errors import DomainError
from domain.events import JSON


class TenantNotConfirmed(DomainError):
    """Erasing a whole tenant names it twice: a stray ``DELETE /tenant`` erases nothing."""

    code = "tenant_not_confirmed"


class Erasure(Aggregate):
    """Session ``session_id`` (and its branches) was erased by ``by``; ids and counts only."""

    class Created(Aggregate.Created):
        session_id: str
        erased_sessions: list[str]
        events: int
        nodes: int
        tombstoned: list[JSON]  # [{session_id, summary_id}]: summaries rewritten elsewhere
        referrers: list[str]  # sessions that showed copies and now show tombstones
        by: str
        tenant: str  # whose session it was: only that tenant reads this record

        def mutate(self, aggregate: Any) -> Any:
            """Over a copy of the erased session a process still caches: no aggregate (404)."""
            if aggregate is not None:
                return None
            return super().mutate(aggregate)

    def __init__(  # what replaying Created calls
        self, session_id: str, erased_sessions: list[str], events: int, nodes: int,
        tombstoned: list[JSON], referrers: list[str], by: str, tenant: str,
    ) -> None:  # fmt: skip
        self.session_id = session_id
        self.tenant = tenant
        self.erased_sessions = erased_sessions
        self.events = events
        self.nodes = nodes
        self.tombstoned = tombstoned
        self.referrers = referrers
        self.by = by


ERASURE_TOPIC = f"{Erasure.Created.__module__}:{Erasure.Created.__qualname__}"
_TOPIC = f"{Erasure.__module__}:{Erasure.__qualname__}"


def erasure_event(session_id: str, version: int, at: datetime, record: JSON) -> Erasure.Created:
    """The record, stored as the erased session's own next event.

    It takes the place of the session's stream: a process that still holds
    the session in its aggregate cache and tries to write to it conflicts
    with this event, reloads, and finds no session (404), instead of storing
    content again under an erased id.  Each erased branch gets one too,
    naming the session whose erasure took it (``record["session_id"]``).
    """
    return Erasure.Created(
        originator_id=UUID(session_id), originator_version=version, timestamp=at,
        originator_topic=_TOPIC, **record,
    )  # fmt: skip


def summary_tombstone(sessions: Iterable[str]) -> str:
    """The text a summary that quoted erased content is left with."""
    return f"[Summary erased: it quoted content of erased session(s) {', '.join(sorted(sessions))}]"


def attach_tombstone(source: str) -> str:
    return f"[Attached context from session {source} was erased]"


def merge_tombstone(source: str) -> str:
    return f"[Merged context from session {source} was erased]"


def quotes(covered_id: str, names: set[str]) -> bool:
    """Whether an item id is, or is a copy of, one of ``names`` (node or summary ids).

    A copy's id is the attach node's id, ``:``, and the copied item's id
    (nested attaches nest the prefix), so a suffix after a ``:`` is checked too.
    """
    if covered_id in names:
        return True
    at = covered_id.find(":")
    while at != -1:
        if covered_id[at + 1 :] in names:
            return True
        at = covered_id.find(":", at + 1)
    return False
