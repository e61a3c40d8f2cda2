"""Reading a working context in order: by ord, visible only, aged, and where folding may start.

Mixed into ``domain.working_context.WorkingContext``, whose sorted indexes
(``order``, ``visible_ords``, ``assistant_ords``) these read without changing
anything but the fold floor's cached position.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from domain.context import STATES, Item
from domain.policy import Policy


def never_folds(item: Item, generation: int = 2) -> bool:
    """An unattached anchor (or, before generation 2, summary): never folded, now or later.

    Generation 2 folds summaries into higher-level ones, so that a long
    session's summaries cannot pile up past the window on their own.
    """
    if item.attached_from is not None:
        return False
    return item.is_anchor or (generation < 2 and item.state == "summary")


class OrderedViews:
    """Relies on the context's items and its sorted ord indexes."""

    policy: Policy
    items: dict[str, Item]
    order: list[int]
    by_ord: dict[int, str]
    assistant_ords: list[int]
    visible_ords: list[int]
    aged: set[str]
    state_counts: dict[str, int]
    fold_floor: int

    def counts(self) -> dict[str, int]:
        return {state: self.state_counts.get(state, 0) for state in STATES}

    def in_order(self, lo: int | None = None, hi: int | None = None) -> list[Item]:
        """Items with lo < ord < hi, in order."""
        start = 0 if lo is None else bisect.bisect_right(self.order, lo)
        stop = len(self.order) if hi is None else bisect.bisect_left(self.order, hi)
        return [self.items[self.by_ord[o]] for o in self.order[start:stop]]

    def iter_ordered(self) -> Iterator[Item]:
        for o in self.order:
            yield self.items[self.by_ord[o]]

    def iter_visible(self, start: int = 0) -> Iterator[Item]:
        """Items not folded into a summary, in order (``iter_ordered`` minus summarized)."""
        for o in self.visible_ords[start:]:
            yield self.items[self.by_ord[o]]

    def aged_in_order(self) -> list[Item]:
        return sorted((self.items[i] for i in self.aged), key=lambda i: i.ord)

    def foldable_from(self) -> int:
        """Index into ``visible_ords`` of the first item that could ever be folded.

        Everything before it is a lone (unattached) summary or anchor, which no
        rule can fold and which cannot join an attach block, so a scan for a
        foldable run may start here.  The floor only moves forward past such
        items, and ``_index`` pulls it back if anything else lands below it.
        """
        ords = self.visible_ords
        index = bisect.bisect_left(ords, self.fold_floor)
        generation = self.policy.generation
        while index < len(ords) and never_folds(self.items[self.by_ord[ords[index]]], generation):
            index += 1
        self.fold_floor = ords[index] if index < len(ords) else (ords[-1] + 1 if ords else -1)
        return index

    def ordered(self) -> list[Item]:
        return [self.items[self.by_ord[o]] for o in self.order]

    def tail_boundary(self) -> int | None:
        """Ord of the (tail+1)-th last assistant turn: tool items before it are old."""
        tail = self.policy.tail_turns
        if len(self.assistant_ords) <= tail:
            return None
        return self.assistant_ords[-(tail + 1)]

    def turns_after(self, ord_: int) -> int:
        return len(self.assistant_ords) - bisect.bisect_right(self.assistant_ords, ord_)
