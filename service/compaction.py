"""Compaction: turning a commit's summary request into a recorded summary.

The API compacts after each command that can grow a context
(``AUTO_COMPACT_AFTER``), once; ``/compact`` also forces a run when the head
asks for none; an import compacts after each of its lines exactly as the API
would have (``service.memory_projection``).  All three choose the run and
call the summarizer here, so their summaries cover the same items.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from eventsourcing.domain import Aggregate

from domain.context import Item
from domain.events import AttachStaged, MergeCompleted, ModelSwitched, NodeAppended, ToolsDeclared
from domain.pipeline import SessionLike, forced_request
from domain.policy import Policy
from domain.rules.redact import mask
from domain.rules.summarize import with_item_ids
from domain.summarizer import Summarizer
from domain.tokens import count_tokens
from telemetry import probes

# The policy: after a command that recorded an event of one of these types (the
# ones that can grow a context) the API compacts the new head, if it asks; an
# import does the same after each line that recorded one
# (``service.memory_projection``).
AUTO_COMPACT_AFTER: frozenset[type[Aggregate.Event]] = frozenset(
    {NodeAppended, AttachStaged, MergeCompleted, ModelSwitched, ToolsDeclared}
)


def grows_context(recorded: Iterable[type[Any]]) -> bool:
    """Whether events of these types call for a compaction check afterwards."""
    return not AUTO_COMPACT_AFTER.isdisjoint(recorded)


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


GUARD_FOLD = "fold:"  # ids of the window guard's extractive folds (domain.rules.window_guard)


def summarize(summarizer: Summarizer, covered: list[Item], items: Sequence[Item] = (),
              allowance: int | None = None, redact: bool = False) -> str:  # fmt: skip
    """The summarizer's text for ``covered`` (raises ``SummarizerError``).

    Pass the summarizer as the session configured it (``summarizer.for_session``).
    A fold the window guard made without an LLM is a stand-in: the summarizer
    reads what it folded instead (from the commit's ``items``), as long as
    that stays within ``allowance`` tokens, so an LLM summary after an outage
    is written from the conversation, not from the stand-in's first lines.
    With ``redact`` (the policy's ``redact_secrets``), no secret reaches the
    summarizer, not even in an item committed before redaction was on.
    """
    read = [
        {"item_id": i.item_id, "role": i.role, "name": i.name,
         "rendered": mask(i.rendered)[0] if redact else i.rendered,
         "state": i.state} for i in read_through_folds(covered, items, allowance)
    ]  # fmt: skip
    with probes.summarizer_call(summarizer.name, sum(i.tokens for i in covered)) as call:
        text = summarizer.summarize(read)
        if call.traced:
            call.output_tokens = count_tokens(text)
    return text


def read_through_folds(covered: list[Item], items: Sequence[Item],
                       allowance: int | None) -> list[Item]:  # fmt: skip
    """``covered`` with each guard fold replaced by what it folded, within ``allowance``."""
    folded: dict[str, list[Item]] = {}
    for item in sorted(items, key=lambda i: i.ord):
        if item.merged_into and item.merged_into.startswith(GUARD_FOLD):
            folded.setdefault(item.merged_into, []).append(item)

    def expand(item: Item) -> list[Item]:
        if item.item_id not in folded:
            return [item]
        return [leaf for inner in folded[item.item_id] for leaf in expand(inner)]

    spent = sum(i.tokens for i in covered)
    out: list[Item] = []
    for item in covered:
        originals = expand(item)
        extra = sum(i.tokens for i in originals) - item.tokens
        if originals != [item] and (allowance is None or spent + extra <= allowance):
            out.extend(originals)
            spent += extra
        else:
            out.append(item)
    return out
