"""Finding a commit and its items: the newest one a session sees at a node, its rows, its items.

Mixed into ``projections.projector.Projector``: a commit's items come from a
warm context if one is cached, else from its stored rows (``load_rows``,
plus the rows not yet written), with their texts read from the nodes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from domain.context import Item, Natural
from domain.working_context import WorkingContext
from projections.dag_index import DagIndex
from projections.expansion import rebase_items
from projections.item_rows import items_from_rows, node_texts
from projections.records import CommitMeta, NodeRow

RowLoader = Callable[[str], list[dict[str, Any]]]


class CommitLookup:
    """Relies on the projector's DAG index, commit metadata, row loader and caches."""

    dag: DagIndex
    load_rows: RowLoader
    pending: dict[str, dict[str, Any]]
    contexts: OrderedDict[str, WorkingContext]
    commits: dict[str, CommitMeta]
    latest_commit: dict[tuple[str, str], str]

    def rows_for(self, checkpoint_id: str) -> list[dict[str, Any]]:
        rows = {r["commit_id"]: r for r in self.load_rows(checkpoint_id)}
        for row in self.pending.values():
            if row["checkpoint_id"] == checkpoint_id:
                rows[row["commit_id"]] = row
        return list(rows.values())

    def items_of(self, commit_id: str, *, copies: bool = True) -> list[Item]:
        """A commit's items as copies, leaving any warm context untouched.

        ``copies=False`` hands out a warm context's own items, for a reader that
        only reads them while it holds the session (a render: issue 29).
        """
        ctx = self.contexts.get(commit_id)
        if ctx is not None:
            return [item.copy() for item in ctx.ordered()] if copies else list(ctx.ordered())
        meta = self.commits[commit_id]
        return items_from_rows(self.rows_for(meta.checkpoint_id), commit_id,
                               self.nodes_in(meta.session_id))  # fmt: skip

    def items_as(self, commit_id: str, session_id: str) -> list[Item]:
        """A commit's items named as ``session_id`` names nodes (``rebase_items``)."""
        meta = self.commits[commit_id]
        items = self.items_of(commit_id)
        if meta.session_id == session_id:
            return items
        return rebase_items(self.dag, items, meta.session_id, session_id)

    def nodes_in(self, session_id: str) -> Callable[[str], NodeRow | None]:
        """The node a stored item of ``session_id`` names, as that session names it
        (``DagIndex.find``): its own id, or another lineage's node key."""
        return lambda ref: self.dag.find(session_id, ref)

    def texts_in(self, session_id: str) -> Callable[[str], Natural | None]:
        """A node's own texts, which stored items refer to instead of copying."""
        node_of = self.nodes_in(session_id)

        def texts_of(ref: str) -> Natural | None:
            node = node_of(ref)
            return node_texts(node) if node is not None else None

        return texts_of

    def commit_at(self, session_id: str, node_id: str) -> str | None:
        """The newest commit ``session_id`` sees at ``node_id``.

        Its own if it made one there, else the one of the session it branched
        from, and so on up: a branch starts at a node of its source, and a pin
        on the branch must not show up in the source (nor the source's later
        pins in the branch, once the branch has a commit of its own there).
        A node of an unrelated session (a merge peer, an attach source) is
        looked up in that session, so callers pass the session that holds it.
        """
        for sid in self.lineage(session_id):
            found = self.latest_commit.get((sid, node_id))
            if found is not None:
                return found
        return None

    def lineage(self, session_id: str) -> Iterator[str]:
        """``session_id``, then the session it branched from, and so on up."""
        sid: str | None = session_id
        for _ in range(len(self.dag.sessions) + 1):  # a branch chain has no cycles
            if sid is None:
                return
            yield sid
            session = self.dag.sessions.get(sid)
            branched = session.branched_from if session is not None else None
            sid = branched["session_id"] if branched else None
