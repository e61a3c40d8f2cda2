"""The mutable state a commit is built in, derived entirely from its items.

Rules run incrementally against this structure: the tail boundary, the idle
heap and the token total are indexes over the items, never extra facts.  So
a working context rebuilt from a stored commit's items behaves exactly like
the one kept in memory, which is what makes rebuilds byte-identical whether
or not a cache was warm.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from domain.call_ids import call_framing
from domain.context import ORD_STEP, STATES, Item, Transition, tightens
from domain.node_text import canonical_json
from domain.policy import Policy
from domain.tokens import blocks_tokens, item_tokens


def never_folds(item: Item, generation: int = 2) -> bool:
    """An unattached anchor (or, before generation 2, summary): never folded, now or later.

    Generation 2 folds summaries into higher-level ones, so that a long
    session's summaries cannot pile up past the window on their own.
    """
    if item.attached_from is not None:
        return False
    return item.is_anchor or (generation < 2 and item.state == "summary")


_SAME: Any = object()


def tokens_of(item: Item, policy: Policy, rendered: str | None = None,
              call: str | None = _SAME, blocks: Any = _SAME) -> int:  # fmt: skip
    """What ``item`` costs showing ``rendered``, ``call`` and ``blocks`` (default: its own).

    Content blocks add what their text does not say (images, documents);
    generation 2 counts a tool call's blocks and ids too (``render.call_framing``).
    """
    text = item.rendered if rendered is None else rendered
    args = item.call if call is _SAME else call
    tokens = item_tokens(text, args, item.name)
    tokens += blocks_tokens(item.blocks if blocks is _SAME else blocks)
    if policy.generation >= 2 and item.role == "tool" and args is not None:
        tokens += call_framing(item)
    return tokens


def result_key(item: Item) -> str:
    """What makes two tool results the same for deduplication."""
    shown = canonical_json(item.blocks) if item.blocks else item.rendered
    return f"{item.name or ''}\x00{shown}"


@dataclass
class WorkingContext:
    policy: Policy
    items: dict[str, Item] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # sorted ords
    by_ord: dict[int, str] = field(default_factory=dict)
    assistant_ords: list[int] = field(default_factory=list)
    idle_heap: list[tuple[float, str]] = field(default_factory=list)
    visible_ords: list[int] = field(default_factory=list)  # sorted ords of non-summarized
    aged: set[str] = field(default_factory=set)  # ids of items in state "aged"
    state_counts: dict[str, int] = field(default_factory=dict)
    fold_floor: int = -1  # visible items before this ord all satisfy ``never_folds``
    total_tokens: int = 0
    system_tokens: int = 0
    aged_upto: int = -1  # tool items at or before this ord were considered by tool aging
    first_user: str | None = None
    pin_locked: set[str] = field(default_factory=set)
    base_locked: set[str] = field(default_factory=set)  # locked for good by a legacy merge
    tool_names: dict[str, int] = field(default_factory=dict)
    attached: set[str] = field(default_factory=set)  # attach sources already expanded
    transitions: list[Transition] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    # The last summary request's scan, reusable while nothing it read changed
    # (``domain.rules.summarize``); only ever a cache, never a fact.
    request_memo: Any = None
    # Tool items the tail boundary has passed that are still full: aging waits
    # for a batch of them (generation 2 batching).  Filtered when used.
    pending_aging: dict[str, None] = field(default_factory=dict)
    # source node id -> how many items hold it (attach and merge bring in only
    # what the target lacks)
    sources: dict[str, int] = field(default_factory=dict)
    # result_key -> (ord, item id) of every item showing that result in full,
    # oldest first: the oldest is what a new equal result refers to, and when
    # it stops showing it the next one takes over, as a cold start would find
    results: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    dedups: dict[str, list[str]] = field(default_factory=dict)  # original -> items that refer to it
    # Per step only (cleared by ``end_step``): items no rule may change in this
    # commit (a merge's base block), items added by it, and whether anything
    # already in the prefix changed (which makes batched work free to run).
    frozen: set[str] = field(default_factory=set)
    fresh: set[str] = field(default_factory=set)
    prefix_changed: bool = False
    step_key: str = ""  # names what this step creates (the commit id)
    folds: int = 0  # folds the window guard made in this step

    @classmethod
    def from_items(cls, policy: Policy, items: list[Item]) -> WorkingContext:
        ctx = cls(policy)
        for item in sorted(items, key=lambda i: i.ord):
            ctx._index(item)
        # Tool aging looks at every tool item before the boundary once more,
        # as a context kept warm since the session began would have: starting
        # from today's boundary instead skipped the tools a lowered
        # ``tail_turns`` left behind, so a restarted process and a rebuild
        # aged different items.
        ctx.aged_upto = -1
        return ctx

    # ----------------------------------------------------------- indexing

    def _index(self, item: Item) -> None:
        self.items[item.item_id] = item
        if item.ord < self.fold_floor and not never_folds(item, self.policy.generation):
            self.fold_floor = item.ord
        self.by_ord[item.ord] = item.item_id
        if not self.order or item.ord > self.order[-1]:
            self.order.append(item.ord)
        else:
            bisect.insort(self.order, item.ord)
        if item.role == "assistant" and item.state != "summarized":
            bisect.insort(self.assistant_ords, item.ord)
        if item.state == "aged":
            self.aged.add(item.item_id)
            if not item.locked:
                heapq.heappush(self.idle_heap, (item.touched_at, item.item_id))
        self.state_counts[item.state] = self.state_counts.get(item.state, 0) + 1
        if item.state != "summarized":
            if not self.visible_ords or item.ord > self.visible_ords[-1]:
                self.visible_ords.append(item.ord)
            else:
                bisect.insort(self.visible_ords, item.ord)
            self.total_tokens += item.tokens
            if item.role == "system":
                self.system_tokens += item.tokens
        if item.role == "user" and item.attached_from is None:
            first = self.items.get(self.first_user) if self.first_user else None
            if first is None or item.ord < first.ord:
                self.first_user = item.item_id
        if item.locked and not item.base_locked:
            self.pin_locked.add(item.item_id)
        if item.base_locked:
            self.base_locked.add(item.item_id)
        if item.role == "tool":
            name = item.name or "tool"
            self.tool_names[name] = self.tool_names.get(name, 0) + 1
        if item.attached_from:
            self.attached.add(item.attached_from)
        if item.source_node_id is not None:
            self.sources[item.source_node_id] = self.sources.get(item.source_node_id, 0) + 1
        if item.dedup_of is not None:
            self.dedups.setdefault(item.dedup_of, []).append(item.item_id)
        elif item.role == "tool" and item.state == "full" and item.has_result:
            self._hold_result(item)

    def holds(self, source_node_id: str | None) -> bool:
        """Whether some item here (in any state) already stands for that node."""
        return source_node_id is not None and source_node_id in self.sources

    def locked(self, item: Item) -> bool:
        """Pinned, or frozen for this commit: no rule may change it."""
        return item.locked or item.item_id in self.frozen

    def end_step(self) -> None:
        self.frozen.clear()
        self.fresh.clear()
        self.prefix_changed = False
        self.folds = 0

    def next_ord(self) -> int:
        return (self.order[-1] // ORD_STEP + 1) * ORD_STEP if self.order else ORD_STEP

    def add(self, item: Item) -> None:
        if item.item_id in self.items:
            raise ValueError(f"duplicate item {item.item_id}")
        self._index(item)
        self.changed.add(item.item_id)
        self.fresh.add(item.item_id)

    def remove(self, item_id: str) -> None:
        """Drop an item a newer tool retry superseded (not a state change)."""
        self._release(self.items[item_id])
        item = self.items.pop(item_id)
        self.order.remove(item.ord)
        del self.by_ord[item.ord]
        if item.ord in self.assistant_ords:
            self.assistant_ords.remove(item.ord)
        self.state_counts[item.state] -= 1
        self.aged.discard(item_id)
        if item.state != "summarized":
            self._hide(item.ord)
            self.total_tokens -= item.tokens
            if item.role == "system":
                self.system_tokens -= item.tokens
        if item.role == "tool":
            name = item.name or "tool"
            self.tool_names[name] -= 1
            if not self.tool_names[name]:
                del self.tool_names[name]
        self.pin_locked.discard(item_id)
        self.base_locked.discard(item_id)
        self.pending_aging.pop(item_id, None)
        if item.source_node_id is not None:
            self.sources[item.source_node_id] -= 1
            if not self.sources[item.source_node_id]:
                del self.sources[item.source_node_id]
        self._forget_result(item)
        if item.dedup_of is not None and item.dedup_of in self.dedups:
            self.dedups[item.dedup_of].remove(item_id)
        if item_id not in self.fresh:
            self.prefix_changed = True
        if self.first_user == item_id:
            users = [i for i in self.ordered() if i.role == "user" and i.attached_from is None]
            self.first_user = users[0].item_id if users else None
        self.changed.discard(item_id)
        self.removed.add(item_id)

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

    def _hide(self, ord_: int) -> None:
        index = bisect.bisect_left(self.visible_ords, ord_)
        if index < len(self.visible_ords) and self.visible_ords[index] == ord_:
            del self.visible_ords[index]

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

    # ------------------------------------------------------------ changes

    def tail_boundary(self) -> int | None:
        """Ord of the (tail+1)-th last assistant turn: tool items before it are old."""
        tail = self.policy.tail_turns
        if len(self.assistant_ords) <= tail:
            return None
        return self.assistant_ords[-(tail + 1)]

    def turns_after(self, ord_: int) -> int:
        return len(self.assistant_ords) - bisect.bisect_right(self.assistant_ords, ord_)

    def retoken(self, item: Item, tokens: int) -> None:
        if item.item_id not in self.fresh:
            self.prefix_changed = True
        if item.state != "summarized":
            self.total_tokens += tokens - item.tokens
            if item.role == "system":
                self.system_tokens += tokens - item.tokens
        item.tokens = tokens
        self.changed.add(item.item_id)

    def rewrite(self, item: Item, rendered: str, call: str | None) -> None:
        """The one way a rule changes what an item shows (its state changes apart)."""
        self._release(item)
        self._forget_result(item)
        item.rendered, item.call, item.blocks = rendered, call, None  # replaced as a whole
        self.retoken(item, tokens_of(item, self.policy))

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

    def set_state(self, item: Item, to_state: str, rule: str, inputs: str) -> None:
        """The one way an item's state changes: tighten-only, audited."""
        if self.locked(item):
            raise AssertionError(f"rule {rule} tried to change locked item {item.item_id}")
        if not tightens(item.state, to_state):
            raise AssertionError(f"{rule}: {item.state} -> {to_state} would loosen")
        if item.item_id not in self.fresh:
            self.prefix_changed = True
        if to_state != "full":
            self._release(item)
            self._forget_result(item)
        before = item.state
        self.state_counts[before] -= 1
        self.state_counts[to_state] = self.state_counts.get(to_state, 0) + 1
        if before == "aged":
            self.aged.discard(item.item_id)
        if to_state == "summarized" and before != "summarized":
            self._hide(item.ord)
        if to_state == "summarized":
            self.total_tokens -= item.tokens
            if item.role == "system":
                self.system_tokens -= item.tokens
            if item.role == "assistant" and item.ord in self.assistant_ords:
                self.assistant_ords.remove(item.ord)
        item.state = to_state
        item.reason = inputs
        if to_state == "aged":
            self.aged.add(item.item_id)
            heapq.heappush(self.idle_heap, (item.touched_at, item.item_id))
        self.audit(item, before, to_state, rule, inputs)

    def audit(self, item: Item, before: str, after: str, rule: str, inputs: str) -> None:
        self.changed.add(item.item_id)
        self.transitions.append(
            Transition(item.item_id, item.source_node_id, before, after, rule, inputs)
        )

    def touch(self, item: Item, at: float) -> None:
        if at > item.touched_at:
            item.touched_at = at
            self.changed.add(item.item_id)
            if item.state == "aged":
                heapq.heappush(self.idle_heap, (at, item.item_id))

    def set_locked(self, item: Item, locked: bool) -> None:
        item.locked = locked or item.base_locked
        if item.locked and not item.base_locked:
            self.pin_locked.add(item.item_id)
        else:
            self.pin_locked.discard(item.item_id)
        if item.base_locked:
            self.base_locked.add(item.item_id)
        self.changed.add(item.item_id)
        if item.state == "aged" and not item.locked:
            heapq.heappush(self.idle_heap, (item.touched_at, item.item_id))
