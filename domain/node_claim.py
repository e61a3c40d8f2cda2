"""Node ids are unique across the whole store, enforced by the event store itself.

The projections key nodes by id alone: a branch refers to its source's nodes
by id, explain and the commit index look nodes up by id, and a merge brings
in a peer's items under their node ids.  Two sessions holding the same id
would make those lookups ambiguous, and the projection would refuse the
second one *after* it was stored.  A session aggregate can only see its own
nodes, so each new node id is claimed by a one-event ``NodeClaim``
aggregate whose id derives from the node id, saved in the same atomic write
as the node's event: a second claim of an id is a primary-key conflict in
the event store, and the whole command stores nothing.

Claims carry no content and projections skip them.
"""

from __future__ import annotations

from datetime import datetime
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


def claim_id(node_id: str) -> UUID:
    return uuid5(_NAMESPACE, node_id)


_TOPIC = f"{NodeClaim.__module__}:{NodeClaim.__qualname__}"


def claim_event(node_id: str, session_id: str, at: datetime) -> NodeClaim.Created:
    """The claim's one event, built directly (a quarter of the cost of the aggregate).

    ``at`` is the node's own time, so the claim says when the id was taken.
    """
    # eventsourcing makes event classes dataclasses at run time; mypy sees the base fields only
    return NodeClaim.Created(  # type: ignore[call-arg]
        originator_id=claim_id(node_id), originator_version=1, timestamp=at,
        originator_topic=_TOPIC, node_id=node_id, session_id=session_id,
    )  # fmt: skip
