"""Equal tool results shown once: which item shows a result in full, which refer to it.

Mixed into ``domain.working_context.WorkingContext``: ``results`` indexes the
items showing each result in full (oldest first) and ``dedups`` the items
shown as a reference to one of them (``domain.rules.dedup``).  When the
original stops showing its result, its references show it again.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from domain.context import Item
from domain.item_cost import tokens_of
from domain.node_text import canonical_json
from domain.policy import Policy


def result_key(item: Item) -> str:
    """What makes two tool results the same for deduplication."""
    shown = canonical_json(item.blocks) if item.blocks else item.rendered
    return f"{item.name or ''}\x00{shown}"


class ResultRefs:
    """Relies on the context's items, policy, ``retoken`` and ``audit``."""

    policy: Policy
    items: dict[str, Item]
    results: dict[str, list[tuple[int, str]]]
    dedups: dict[str, list[str]]

    if TYPE_CHECKING:  # provided by WorkingContext; declared here for the type checker only

        def retoken(self, item: Item, tokens: int) -> None: ...
        def audit(self, item: Item, before: str, after: str, rule: str, inputs: str) -> None: ...

    def result_holder(self, item: Item) -> str | None:
        """The oldest item showing ``item``'s result in full, if any."""
        holders = self.results.get(result_key(item))
        return holders[0][1] if holders else None

    def _hold_result(self, item: Item) -> None:
        bisect.insort(self.results.setdefault(result_key(item), []), (item.ord, item.item_id))

    def _forget_result(self, item: Item) -> None:
        """``item`` no longer shows its full result: it can no longer be referred to."""
        if item.role != "tool":
            return
        key = result_key(item)
        holders = self.results.get(key, [])
        if (item.ord, item.item_id) in holders:
            holders.remove((item.ord, item.item_id))
            if not holders:
                del self.results[key]

    def refer(self, item: Item, original: Item, rendered: str) -> None:
        """Show a fresh ``item`` as a reference to ``original``'s equal result."""
        self._forget_result(item)
        item.rendered, item.dedup_of, item.blocks = rendered, original.item_id, None
        self.retoken(item, tokens_of(item, self.policy))
        self.dedups.setdefault(original.item_id, []).append(item.item_id)

    def _release(self, original: Item) -> None:
        """Items shown as references to ``original`` get its result back before it changes."""
        for item_id in self.dedups.pop(original.item_id, []):
            item = self.items.get(item_id)
            if item is None or item.dedup_of != original.item_id:
                continue
            self._show_again(item, original, f"{original.item_id} no longer shows it in full")

    def unrefer(self, item: Item) -> None:
        """Show a reference's result in full again, before a pin locks it as it is.

        Audited as the pin's doing: the pin is what asked for the item as it is.
        """
        original = self.items.get(item.dedup_of or "")
        if original is None:
            return
        self.dedups[original.item_id].remove(item.item_id)
        self._show_again(item, original, "pinned", "pin")

    def _show_again(self, item: Item, original: Item, why: str, rule: str = "dedup") -> None:
        item.dedup_of = None
        if item.state != "full":
            return
        item.rendered, item.blocks = original.rendered, original.blocks
        self.retoken(item, tokens_of(item, self.policy))
        self._hold_result(item)
        self.audit(item, "full", "full", rule, f"{why}: result shown in full again")
