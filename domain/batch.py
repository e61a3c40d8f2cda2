"""Batch append: several nodes in one atomic command.

An assistant turn with three parallel tool calls is four nodes; appended one
request at a time it is four round trips, four versions, and three moments
where another reader sees a call without its siblings.  A batch runs every
node through the same aggregate commands, in order, on the session in
memory, and the caller saves the events together: a later node may name an
earlier one (as its predecessor, caller, read or the node it is a version
of), and any refused node refuses the whole batch with nothing stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from domain import errors

if TYPE_CHECKING:
    from domain.session import Session

MAX_BATCH = 1_000
# What a batch entry may say, by kind of entry.
NODE_KEYS = frozenset({"role", "node_id", "name", "input", "output", "predecessor", "caller",
                       "call_id", "reads", "metadata", "at"})  # fmt: skip
VERSION_KEYS = frozenset({"sibling_of", "kind", "role", "node_id", "name", "input", "output",
                          "metadata", "at"})  # fmt: skip


def append_batch(
    session: Session, nodes: Sequence[Mapping[str, Any]], at: datetime | None = None
) -> list[str]:
    """Append each entry in order; the new node ids.

    An entry is a node (``role`` and the fields of ``append_node``) or, with
    ``sibling_of`` and ``kind``, a new version of a node (the fields of
    ``add_sibling``).  ``at`` is the default time of entries without their own.
    A refusal names the entry: ``nodes[2]: ...`` with ``index`` in its details.
    """
    if not nodes:
        raise errors.InvalidCommand("a batch needs at least one node")
    if len(nodes) > MAX_BATCH:
        raise errors.InvalidCommand(f"a batch holds at most {MAX_BATCH} nodes", count=len(nodes))
    ids: list[str] = []
    for index, entry in enumerate(nodes):
        try:
            ids.append(_one(session, dict(entry), at))
        except errors.DomainError as exc:
            raise _at_index(exc, index) from None
    return ids


def _one(session: Session, entry: dict[str, Any], at: datetime | None) -> str:
    when = entry.pop("at", None) or at
    if entry.get("sibling_of") is not None:
        unknown = sorted(set(entry) - VERSION_KEYS)
        if unknown:
            raise errors.InvalidCommand(
                f"a version takes its edges from the node it is a version of: {unknown} "
                "cannot be given", fields=unknown)  # fmt: skip
        of = entry.pop("sibling_of")
        kind = entry.pop("kind", None)
        role = entry.pop("role", None)
        if role is not None and role != session.node(of).role:
            raise errors.InvalidCommand(f"a version of a {session.node(of).role} node has the "
                                        "same role", role=role)  # fmt: skip
        if kind is None:
            raise errors.InvalidCommand("a version needs kind 'retry' or 'edit'")
        entry = {k: v for k, v in entry.items() if v is not None}
        return session.add_sibling(of, kind=kind, at=when, **entry)
    entry.pop("sibling_of", None)
    if entry.pop("kind", None) is not None:
        raise errors.InvalidCommand("kind is for versions: give sibling_of as well")
    unknown = sorted(set(entry) - NODE_KEYS)
    if unknown:
        raise errors.InvalidCommand(f"unknown field(s) {unknown}", fields=unknown)
    role = entry.pop("role", None)
    if role is None:
        raise errors.InvalidCommand("a node needs a role (or sibling_of for a version)")
    entry = {k: v for k, v in entry.items() if v is not None}
    return session.append_node(role, at=when, **entry)


def _at_index(exc: errors.DomainError, index: int) -> errors.DomainError:
    """The same refusal (class and code), its message prefixed with the entry."""
    exc.message = f"nodes[{index}]: {exc.message}"
    exc.args = (exc.message,)
    exc.details = {**exc.details, "index": index}
    return exc
