"""Explain: why a node's item is in the state the head shows, rule by rule.

The answer is about the head a user is looking at.  Its history is the
audit rows of the commits that head descends from (its ancestry across
merge peers and the source a branch started from), so a branch explains
the aging its source did before the branch point, a retry that rebuilt an
item from its node does not repeat the rows of the line it replaced, and
checking out an older head shows the history up to there.  When a node
shows as more than one item (its own, and copies an attach or a merge
brought in), ``current`` is the one the head renders for the node itself,
and the copies are listed apart; an attach node lists the items it staged.
For a summarized item, ``summarized_by`` is the summary the head shows in
its place (the top of a fold of folds) and ``survived`` that summary's
lines quoting the node's own text (``domain.survived``): what of the node
the model still reads.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from domain import errors
from domain.context import Item
from domain.survived import kept_lines
from projections import tables as t
from projections.projector import Projector
from projections.queries import head_commit_id, session_row
from projections.records import NodeRow
from projections.store import ProjectionStore

ROW_FIELDS = ("item_id", "from_state", "to_state", "rule", "rules_version", "event_id",
              "event_seq", "commit_id", "inputs")  # fmt: skip


def ancestry(projector: Projector, commit_id: str | None) -> set[str]:
    """``commit_id`` and every commit it descends from, through all parents."""
    seen: set[str] = set()
    stack = [commit_id] if commit_id else []
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        meta = projector.commits.get(current)
        if meta is not None:
            stack.extend(meta.parent_ids)
    return seen


def _item(item: Item) -> dict[str, Any]:
    return {"item_id": item.item_id, "state": item.state, "locked": item.locked,
            "reason": item.reason, "tokens": item.tokens,
            "attached_from": item.attached_from, "merged_into": item.merged_into}  # fmt: skip


def _shown(items: list[Item], node_id: str) -> Item | None:
    """The item that stands for ``node_id`` itself: its own, else a visible copy."""
    own = [i for i in items if i.source_node_id == node_id]
    for item in own:
        if item.item_id == node_id:
            return item
    visible = [i for i in own if i.state != "summarized"]
    candidates = visible or own
    return candidates[0] if candidates else None


def _survived(projector: Projector, session_id: str, node_id: str, shown: Item | None,
              items: list[Item]) -> tuple[str | None, list[str]]:  # fmt: skip
    """The summary standing for ``shown`` in the head, and its lines quoting the node."""
    if shown is None or shown.state != "summarized":
        return None, []
    by_id = {i.item_id: i for i in items}
    summary: Item | None = shown
    seen: set[str] = set()
    while summary is not None and summary.state == "summarized" and summary.merged_into:
        if summary.item_id in seen:
            return None, []
        seen.add(summary.item_id)
        summary = by_id.get(summary.merged_into)
    if summary is None or summary.state != "summary":
        return None, []
    natural = projector.texts_in(session_id)(node_id)
    source = natural.rendered if natural is not None else shown.rendered
    return summary.item_id, kept_lines(summary.rendered, source)


def _names(projector: Projector, session_id: str, node: NodeRow, row: Any) -> bool:
    """Whether ``row``'s source is ``node``: the bare id means it only in sessions that
    show the node by that id (its own, its branches), not in one with its own node of it."""
    if session_id == node.session_id:
        return bool(row.source_node_id == node.node_id)
    return bool(row.source_node_id == projector.dag.name_in(session_id, node))


def explain(projector: Projector, store: ProjectionStore, session_id: str,
            node_id: str) -> dict[str, Any]:  # fmt: skip
    session = session_row(projector, session_id)
    node = projector.dag.find(session.session_id, node_id)
    owner = projector.dag.sessions.get(node.session_id) if node is not None else None
    if node is None or owner is None or owner.tenant != session.tenant:
        # another tenant's node reads exactly like one that exists nowhere
        raise errors.NodeNotFound(f"unknown node {node_id!r}", node_id=node_id)
    # how this session's items name the node: by id if it shows it, else by key
    node_id = projector.dag.name_in(session.session_id, node)
    commit_id = head_commit_id(projector, session)
    items = projector.items_of(commit_id) if commit_id else []
    lineage = ancestry(projector, commit_id)
    sessions = {projector.commits[c].session_id for c in lineage if c in projector.commits}
    staged = [i for i in items if i.item_id.startswith(f"{node_id}:")]  # an attach's expansion
    staged_ids = {i.item_id for i in staged}
    c = t.transitions.c
    query = (
        select(t.transitions)
        .where(c.session_id.in_(sorted(sessions) or [session.session_id]))
        .where(c.source_node_id.in_({node_id, node.node_id}) | c.item_id.in_(sorted(staged_ids)))
        .order_by(c.notification_id, c.ordinal)
    )
    with store.engine.connect() as conn:
        found = conn.execute(query).all()
    rows = [r for r in found if r.commit_id in lineage
            and (r.item_id in staged_ids or _names(projector, r.session_id, node, r))]  # fmt: skip
    shown = _shown(items, node_id)
    if not rows and shown is None and node.session_id not in projector.lineage(session.session_id):
        # Another session's node, never brought into this one by attach or merge.
        raise errors.NodeNotFound(f"node {node_id!r} is not part of session "
                                  f"{session.session_id}", node_id=node_id)  # fmt: skip
    mine = shown.item_id if shown is not None else node_id
    by_item: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_item.setdefault(row.item_id, []).append({k: getattr(row, k) for k in ROW_FIELDS})
    copies = [i for i in items if i.source_node_id == node_id and i.item_id != mine]
    summarized_by, survived = _survived(projector, session.session_id, node_id, shown, items)
    return {
        "session_id": session.session_id, "node_id": node_id, "commit_id": commit_id,
        "current": _item(shown) if shown is not None else None,
        "transitions": by_item.get(mine, []),
        "copies": [dict(_item(i), transitions=by_item.get(i.item_id, [])) for i in copies],
        "staged": [dict(_item(i), transitions=by_item.get(i.item_id, [])) for i in staged],
        "summarized_by": summarized_by, "survived": survived,
    }  # fmt: skip
