"""A process holds the sessions it touches, not the whole store.

Without a working set, a process loads every node (content included) and
every commit's metadata of the whole store before its first answer: memory
and start-up grow with the store, not with what is asked of it.  With one,
only the session rows (one small row per session) and a count of each
session's nodes are read at start; a session's nodes and commit metadata
come in from the projection tables the first time anything looks one of
them up (its own id, a node key, a commit id), together with the sessions it
branches from, attaches or merges as those are looked up in turn, and the
least recently used sessions go again once more than ``budget`` nodes are
held.  Sessions changed in the batch being projected are never evicted:
their newest rows are not stored yet.

The lookups stay dictionaries (``LazyDict``), so the projector, queries and
explain read them as before; a miss asks the working set to bring in the
session that holds the key, once.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from domain.store_config import WORKING_SET
from projections.records import CommitMeta, NodeRow, key_session, parent_ids_of

K = TypeVar("K")
V = TypeVar("V")

DEFAULT_BUDGET = WORKING_SET  # nodes held before the least recently used sessions go


class LazyDict(dict[K, V]):
    """A dict that, on a miss, asks ``fault(key)`` to load what holds the key."""

    def __init__(self, fault: Callable[[K], bool]) -> None:
        super().__init__()
        self._fault = fault

    def __missing__(self, key: K) -> V:
        if self._fault(key) and dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def get(self, key: K, default: Any = None) -> Any:
        if dict.__contains__(self, key) or (self._fault(key) and dict.__contains__(self, key)):
            return dict.__getitem__(self, key)
        return default

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        return bool(self._fault(key)) and dict.__contains__(self, key)  # type: ignore[arg-type]


class RowSource(Protocol):
    """What the working set reads from the projection tables."""

    def session_of_commit(self, commit_id: str) -> str | None: ...

    def node_rows(self, session_ids: list[str]) -> Iterable[Any]: ...

    def commit_metas(self, session_ids: list[str]) -> Iterable[Sequence[Any]]: ...


class Holder(Protocol):
    """The indexes a session's rows go into and come out of (the projector)."""

    def hold_node(self, node: NodeRow) -> None: ...

    def hold_commit(self, meta: CommitMeta) -> None: ...

    def release_session(self, session_id: str) -> None: ...


class WorkingSet:
    def __init__(self, source: RowSource, holder: Holder, budget: int = DEFAULT_BUDGET) -> None:
        self.source = source
        self.holder = holder
        self.budget = budget
        self.loaded: OrderedDict[str, int] = OrderedDict()  # session -> nodes held, LRU first
        self.dirty: set[str] = set()  # changed in the batch being projected
        self._loading = False

    def is_loaded(self, session_id: str) -> bool:
        return session_id in self.loaded

    def ensure(self, session_id: str) -> None:
        """Bring ``session_id``'s rows in if they are not held (and mark it recently used)."""
        if session_id in self.loaded:
            self.loaded.move_to_end(session_id)
            return
        if self._loading:
            return  # a lookup made while loading: the rows are on their way
        self._loading = True
        try:
            held = 0
            self.loaded[session_id] = 0
            for row in self.source.node_rows([session_id]):
                self.holder.hold_node(NodeRow.from_row(row))
                held += 1
            for meta in self.source.commit_metas([session_id]):
                self.holder.hold_commit(meta_of(meta))
            self.loaded[session_id] = held
        except BaseException:
            # half a session held as if whole would answer wrongly from then on:
            # let what came in go, so the next lookup loads it again
            del self.loaded[session_id]
            self.holder.release_session(session_id)
            raise
        finally:
            self._loading = False

    def used(self, session_id: str) -> None:
        """A query asks about ``session_id``: if held, it is the last to go.

        Lookups that hit are plain dictionary reads and leave no trace, so the
        queries say which session they serve."""
        if session_id in self.loaded:
            self.loaded.move_to_end(session_id)

    def touch(self, session_id: str) -> None:
        """``session_id`` is changed by the event being projected: hold it, keep it."""
        self.ensure(session_id)
        self.dirty.add(session_id)

    def grew(self, session_id: str) -> None:
        if session_id in self.loaded:
            self.loaded[session_id] += 1

    def fault_node(self, key: object) -> bool:
        """A node key names its session (``records.node_key``): no query needed."""
        if not isinstance(key, str) or "/" not in key:
            return False
        return self.fault_session(key_session(key))

    def fault_commit(self, commit_id: object) -> bool:
        return self._fault_via(self.source.session_of_commit, commit_id)

    def _fault_via(self, owner: Callable[[str], str | None], key: object) -> bool:
        """Load the session ``owner`` says holds ``key`` (whether anything came in)."""
        if not isinstance(key, str) or self._loading:
            return False
        return self.fault_session(owner(key))

    def fault_session(self, session_id: object) -> bool:
        if not isinstance(session_id, str) or session_id in self.loaded or self._loading:
            return False
        self.ensure(session_id)
        return True

    def stored(self) -> None:
        """The batch's rows are written: its sessions may go like any other."""
        self.dirty.clear()

    def trim(self) -> int:
        """Let the least recently used sessions go while more than ``budget`` nodes are
        held; how many went (the service counts them: ``Processor.on_working_set``)."""
        held = sum(self.loaded.values())
        evicted = 0
        for session_id in list(self.loaded):
            if held <= self.budget or len(self.loaded) <= 1:
                break
            if session_id in self.dirty:
                continue
            held -= self.loaded.pop(session_id)
            self.holder.release_session(session_id)
            evicted += 1
        return evicted

    def held_nodes(self) -> int:
        return sum(self.loaded.values())


def meta_of(row: Sequence[Any]) -> CommitMeta:
    """A commit's metadata from its stored columns, in ``session_rows.META_COLUMNS``'s
    order (the ``items`` column is not needed).  A cold read makes one for every
    commit of the session, so the usual single parent is read without the parser."""
    (commit_id, session_id, parents, head, checkpoint, deltas, notification, request,
     tokens, over, rules) = row  # fmt: skip
    return CommitMeta(
        commit_id, session_id, parent_ids_of(parents), head, checkpoint, deltas, notification,
        json.loads(request) if request else None, tokens,
        json.loads(over) if over else None, rules,
    )  # fmt: skip
