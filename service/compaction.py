"""Compaction: turning a commit's summary request into a recorded summary.

The API compacts after each command that can grow a context
(``AUTO_COMPACT_AFTER``), once; ``/compact`` also forces a run when the head
asks for none; an import compacts after each of its lines exactly as the API
would have (``service.memory_projection``).  All three choose the run and
call the summarizer here, so their summaries cover the same items.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from eventsourcing.domain import Aggregate

from domain.context import Item
from domain.events import AttachStaged, MergeCompleted, ModelSwitched, NodeAppended, ToolsDeclared
from domain.pipeline import SessionLike, forced_request
from domain.policy import Policy
from domain.rules.redact import mask
from domain.rules.summarize import with_item_ids
from domain.summarizer import BudgetedSummarizer, Summarizer
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


SOURCE_CHARS = 8_000  # of one node's own content a summarizer reads in place of its stub
MIN_SUMMARY_TOKENS = 200


def summarize(summarizer: Summarizer, covered: list[Item], items: Sequence[Item] = (),
              allowance: int | None = None, redact: bool = False,
              sources: Callable[[str], str | None] | None = None,
              max_tokens: int | None = None) -> str:  # fmt: skip
    """The summarizer's text for ``covered`` (raises ``SummarizerError``).

    Pass the summarizer as the session configured it (``summarizer.for_session``).
    A fold the window guard made without an LLM is a stand-in: the summarizer
    reads what it folded instead (from the commit's ``items``), as long as
    that stays within ``allowance`` tokens, so an LLM summary after an outage
    is written from the conversation, not from the stand-in's first lines.
    ``sources`` gives a node's own content by its id: an aged or cleared item
    is summarized from what its node said (capped at ``SOURCE_CHARS``), not
    from the stub the render shows, so its facts reach the summary.  With
    ``max_tokens`` a summarizer that can fill a budget (``summarize_within``)
    fills that one.  With ``redact`` (the policy's ``redact_secrets``), no
    secret reaches the summarizer, not even in an item committed before
    redaction was on.
    """
    read = read_through_folds(covered, items, allowance)
    dicts = []
    for i in read:
        text = i.rendered
        if (
            sources is not None
            and i.source_node_id
            and i.state in ("aged", "cleared", "summarized")
        ):
            text = (sources(i.source_node_id) or text)[:SOURCE_CHARS]
        dicts.append({"item_id": i.item_id, "role": i.role, "name": i.name,
                      "rendered": mask(text)[0] if redact else text, "state": i.state,
                      "call": mask(i.call or "")[0] if redact else i.call,
                      "is_error": i.is_error})  # fmt: skip
    with probes.summarizer_call(summarizer.name, sum(i.tokens for i in covered)) as call:
        if max_tokens is not None and isinstance(summarizer, BudgetedSummarizer):
            room = min(max_tokens, int(0.8 * sum(i.tokens for i in covered)))
            text = summarizer.summarize_within(dicts, max(MIN_SUMMARY_TOKENS, room))
        else:
            text = summarizer.summarize(dicts)
        if call.traced:
            call.output_tokens = count_tokens(text)
    return text


def summary_budget(history: int, policy: Policy) -> int | None:
    """Tokens one summary may fill under ``policy``, or None (the summarizer's own cap)."""
    if policy.summary_budget is None:
        return None
    # A fold lands at the target plus its summary: under ``compact_at`` with room
    # to spare, or it would be over the threshold again and fold on every commit.
    share = min(policy.summary_budget, policy.compact_at - policy.summary_target - 0.05)
    return max(MIN_SUMMARY_TOKENS, int(history * share))


def source_texts(items: Sequence[Item], texts_of: Callable[[str], Any]) -> dict[str, str]:
    """What each node behind an aged, cleared or guard-folded item said (``Natural``)."""
    out: dict[str, str] = {}
    for item in items:
        if not item.source_node_id or item.state == "full" or item.state == "summary":
            continue
        if item.state == "summarized" and not (item.merged_into or "").startswith(GUARD_FOLD):
            continue
        natural = texts_of(item.source_node_id)
        if natural is not None:
            out[item.source_node_id] = natural.rendered
    return out


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
