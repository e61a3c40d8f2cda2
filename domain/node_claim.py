"""A node id is unique in its session; a branch may not reuse one its history shows.

Two sessions may both name a node ``call_0`` (a model numbers its calls, a
deterministic agent runs twice): the projections key a node by its session
and its id (``projections.records.node_key``).  Inside one session an id
names one node.  The session aggregate refuses an id it knows, and a writer
whose copy was stale loses the save on the session's own version key; the
store then says whether the winner took the same id
(``SessionStore.refuse_stored``).  A branch also refuses ids its lineage
shows (``InheritedIds``, below).

Stores written before 2026-12-07 also hold a one-event ``NodeClaim``
aggregate per node, saved in the node's write, whose id derived from the
session and the node id (earlier still, from the node id alone:
``legacy_claim_id``).  They guarded nothing the version key did not, and
were half the event log's rows (6% of a store's bytes; issue 29), so new
nodes no longer get one.  Old claims stay, unused: projections skip them, and an
erasure deletes both forms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

_NAMESPACE = uuid5(NAMESPACE_URL, "ctxstore:node-id")


class NodeClaim(Aggregate):
    """Node ``node_id`` belongs to session ``session_id``."""

    class Created(Aggregate.Created):
        node_id: str
        session_id: str

    def __init__(self, node_id: str, session_id: str) -> None:  # what replaying Created calls
        self.node_id = node_id
        self.session_id = session_id


def claim_id(session_id: str, node_id: str) -> UUID:
    """The claim of ``node_id`` inside ``session_id`` (a session id has no ``/``)."""
    return uuid5(_NAMESPACE, f"{session_id}/{node_id}")


def legacy_claim_id(node_id: str) -> UUID:
    """The store-wide claim older versions saved for each node id."""
    return uuid5(_NAMESPACE, node_id)


# A session's nodes (id -> the aggregate's lean record) and where it branched from
SourceNodes = Callable[[str], "tuple[dict[str, Any], Any] | None"]
CACHE = 1024  # branch points whose inherited ids are kept


class InheritedIds:
    """The node ids a branch shows from its lineage, per branch point.

    The source's nodes stored up to the branch point (a little more than the
    chain the branch shows, but decided from the aggregates alone), and so on
    up the sources.  Those nodes never change, so the answer is kept.
    """

    def __init__(self, load: SourceNodes) -> None:
        self.load = load
        self.known: dict[tuple[str, str], frozenset[str]] = {}

    def __call__(self, branched_from: Mapping[str, Any]) -> frozenset[str]:
        key = (str(branched_from["session_id"]), str(branched_from["node_id"]))
        found = self.known.get(key)
        if found is not None:
            return found
        ids = {key[1]}
        loaded = self.load(key[0])
        if loaded is not None:  # an erased source shows nothing any more
            nodes, source_branched = loaded
            raw = nodes.get(key[1])
            horizon = raw["seq"] if raw is not None else 0
            ids.update(nid for nid, node in nodes.items() if node["seq"] <= horizon)
            if source_branched is not None:
                ids.update(self(source_branched))
        if len(self.known) >= CACHE:
            self.known.clear()
        found = self.known[key] = frozenset(ids)
        return found
