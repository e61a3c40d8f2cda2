"""The mutable state a commit is built in, derived entirely from its items.

Rules run incrementally against this structure: the tail boundary, the idle
heap and the token total are indexes over the items, never extra facts.  So
a working context rebuilt from a stored commit's items behaves exactly like
the one kept in memory, which is what makes rebuilds byte-identical whether
or not a cache was warm.  Reading it in order is ``domain.ordered_views``',
equal tool results shown once ``domain.result_refs``', and what an item
costs ``domain.item_cost``'s.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Any

from domain.context import ORD_STEP, Item, Transition, tightens
from domain.item_cost import tokens_of
from domain.ordered_views import OrderedViews, never_folds
from domain.policy import Policy
from domain.result_refs import ResultRefs


@dataclass
class WorkingContext(ResultRefs, OrderedViews):
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
    # The same for assistant items whose thinking waits to be cleared (rules/thinking.py).
    thought_upto: int = -1
    pending_thinking: dict[str, None] = field(default_factory=dict)
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
        self.pending_thinking.pop(item_id, None)
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

    def _hide(self, ord_: int) -> None:
        index = bisect.bisect_left(self.visible_ords, ord_)
        if index < len(self.visible_ords) and self.visible_ords[index] == ord_:
            del self.visible_ords[index]

    # ------------------------------------------------------------ changes

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
