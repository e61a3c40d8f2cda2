"""Attach and merge: bringing another head's items into a commit.

An attach copies the source commit's visible items once per source (the
dedup key is ``session:head``), between open and close markers, so the
model can tell staged context from its own conversation.  A merge adds the
peers' items that the base does not already hold and locks the base peer's
block, which is the only way a commit gets several parents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.context import STATE_ORDER, Item
from domain.tokens import item_tokens
from domain.working_context import WorkingContext
from projections.records import NodeRow

if TYPE_CHECKING:
    from projections.projector import Projector


def _marker(node: NodeRow, suffix: str, text: str, key: str, at: float, ord_: int) -> Item:
    return Item(
        item_id=f"{node.node_id}:{suffix}", source_node_id=node.node_id, role="marker",
        state="full", rendered=text, tokens=item_tokens(text), ord=ord_, touched_at=at,
        attached_from=key,
    )  # fmt: skip


def _copy(item: Item, item_id: str, ord_: int, attached_from: str | None) -> Item:
    copy = item.copy()
    copy.item_id = item_id
    copy.ord = ord_
    copy.attached_from = attached_from
    copy.locked = False
    copy.base_locked = False
    copy.is_anchor = False
    if copy.merged_into:
        copy.merged_into = f"{item_id.rsplit(':', 1)[0]}:{copy.merged_into}"
    return copy


def expand_attach(projector: Projector, ctx: WorkingContext, node: NodeRow) -> None:
    source = node.meta["source_session"]
    head = node.meta["source_head"]
    key = f"{source}:{head}"
    if key in ctx.attached:
        return  # this source is already staged under this head: expand once
    commit_id = node.meta.get("commit")
    if commit_id not in projector.commits:
        commit_id = projector.commit_at(source, head)
    at = node.created_at
    if commit_id is None:
        text = f"[Attached context from session {source} at {head} could not be loaded]"
        ctx.add(Item(
            item_id=f"{node.node_id}:fallback", source_node_id=node.node_id, role="user",
            state="full", rendered=text, tokens=item_tokens(text), ord=ctx.next_ord(),
            touched_at=at, attached_from=key,
        ))  # fmt: skip
        return
    ctx.add(_marker(node, "open", f"[Attached context from session {source}, head {head}]",
                    key, at, ctx.next_ord()))  # fmt: skip
    for item in projector.items_of(commit_id):
        if item.state == "summarized" or item.role == "marker":
            continue
        ctx.add(_copy(item, f"{node.node_id}:{item.item_id}", ctx.next_ord(), key))
    ctx.add(_marker(node, "close", "[End of attached context]", key, at, ctx.next_ord()))


def _expansion(item: Item) -> str:
    """The attach node whose expansion an attached item belongs to."""
    return item.item_id.split(":", 1)[0]


def _adopt_tighter(ctx: WorkingContext, peers: list[tuple[str, list[Item]]]) -> None:
    """An item both sides hold takes the tighter state, so no parent sees it loosen."""
    for commit_id, items in peers:
        for item in items:
            mine = ctx.items.get(item.item_id)
            if (mine is None or mine.locked or item.state not in STATE_ORDER
                    or mine.state not in STATE_ORDER
                    or STATE_ORDER[item.state] <= STATE_ORDER[mine.state]):  # fmt: skip
                continue
            mine.rendered, mine.call = item.rendered, item.call
            mine.merged_into = item.merged_into
            ctx.retoken(mine, item.tokens)
            ctx.set_state(mine, item.state, "merge", f"peer commit {commit_id} holds it "
                          f"{item.state}")  # fmt: skip


def merge_peers(projector: Projector, ctx: WorkingContext, peer_commits: list[str]) -> None:
    peers = [(commit_id, projector.items_of(commit_id)) for commit_id in peer_commits]
    _adopt_tighter(ctx, peers)
    owners: dict[str, str] = {}  # attach source -> the expansion staged under this head
    for item in ctx.ordered():
        if not item.base_locked:
            item.base_locked = True
            ctx.set_locked(item, True)
        if item.attached_from:
            owners.setdefault(item.attached_from, _expansion(item))
    for _, items in peers:
        for item in items:
            if item.item_id in ctx.items:
                continue
            if item.attached_from:  # a source the base (or an earlier peer) staged: once
                owner = owners.setdefault(item.attached_from, _expansion(item))
                if owner != _expansion(item):
                    continue
            peer = _copy(item, item.item_id, ctx.next_ord(), item.attached_from)
            peer.merged_into = item.merged_into
            ctx.add(peer)
