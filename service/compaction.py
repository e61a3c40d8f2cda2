"""Compaction: turning a commit's summary request into a recorded summary.

The API compacts after each command that can grow a context
(``AUTO_COMPACT_AFTER``), once; ``/compact`` also forces a run when the head
asks for none; an import compacts after each of its lines exactly as the API
would have (``service.memory_projection``).  All three choose the run and
call the summarizer here, so their summaries cover the same items.
"""

from __future__ import annotations

from typing import Any

from domain.context import Item
from domain.pipeline import SessionLike, forced_request
from domain.policy import Policy
from domain.rules.summarize import with_item_ids
from domain.summarizer import Summarizer

# The commands after which the API compacts the new head, if it asks.
AUTO_COMPACT_AFTER = frozenset({"append_node", "add_sibling", "attach", "merge", "switch_model"})


def run_to_fold(
    items: list[Item], stored: dict[str, Any] | None, force: bool = False,
    session: SessionLike | None = None, policy: Policy | None = None,
) -> list[Item]:  # fmt: skip
    """The items a summary covers: the commit's own request, or a forced one."""
    request = with_item_ids(stored, items) if stored else None
    if request is None and force and session is not None and policy is not None:
        request = forced_request(items, session, policy)
    if request is None:
        return []
    by_id = {i.item_id: i for i in items}
    return [by_id[i] for i in request["item_ids"] if i in by_id]


def summarize(summarizer: Summarizer, covered: list[Item]) -> str:
    """The summarizer's text for ``covered`` (raises ``SummarizerError``).

    Pass the summarizer as the session configured it (``summarizer.for_session``).
    """
    return summarizer.summarize(
        [{"item_id": i.item_id, "role": i.role, "name": i.name, "rendered": i.rendered,
          "state": i.state} for i in covered]
    )  # fmt: skip
