"""Attach and merge: bringing another head's items into a commit.

An attach copies the source commit's visible items once per source (the
dedup key is ``session:head``), between open and close markers, so the
model can tell staged context from its own conversation.  A merge adds the
peers' items that the base does not already hold; it is the only way a
commit gets several parents.

Generation 2 (see the README's "Merge and attach"): an attach or a merge
brings in only what the target lacks: an item whose source node the target
already holds, in whatever state, is shared history and is not copied
again, nor a summary of nothing but such items.  A merge freezes the base
peer's block for the merge commit only (``WorkingContext.frozen``): that
commit shows the base as it stood plus what the peers add, and from the
next commit on, the merged context ages, clears and folds like any other.
Before generation 2 the base block stayed locked for good.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Protocol

from domain.context import STATE_ORDER, Item
from domain.item_cost import tokens_of
from domain.tokens import item_tokens
from domain.working_context import WorkingContext
from projections.dag_index import DagIndex
from projections.erasure import attach_erased
from projections.records import NodeRow


class Commits(Protocol):
    """What expanding needs of the projector: other commits' items, found by head.

    A protocol, not the ``Projector`` itself, so this module does not import
    the module that imports it.
    """

    @property
    def commits(self) -> Container[str]: ...

    @property
    def dag(self) -> DagIndex: ...  # its sessions: a source missing there was erased

    def commit_at(self, session_id: str, node_id: str) -> str | None: ...

    def items_of(self, commit_id: str) -> list[Item]: ...

    def items_as(self, commit_id: str, session_id: str) -> list[Item]: ...


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


def _shared(ctx: WorkingContext, item: Item, items: list[Item]) -> bool:
    """Whether the target already holds ``item``: the same node, or a summary of only such."""
    if ctx.holds(item.source_node_id) or item.item_id in ctx.items:
        return True
    if item.state != "summary":
        return False
    covered = [i for i in items if i.merged_into == item.item_id]
    return bool(covered) and all(_shared(ctx, i, items) for i in covered)


def _shown_in_full(item: Item, by_id: dict[str, Item]) -> Item:
    """``item`` itself, or a copy showing its result where it only referred to another."""
    original = by_id.get(item.dedup_of) if item.dedup_of else None
    if original is None:
        return item
    full = item.copy()
    full.rendered, full.dedup_of = original.rendered, None
    return full


def expand_attach(projector: Commits, ctx: WorkingContext, node: NodeRow) -> None:
    source = node.meta["source_session"]
    head = node.meta["source_head"]
    key = f"{source}:{head}"
    if key in ctx.attached:
        return  # this source is already staged under this head: expand once
    if source not in projector.dag.sessions:
        attach_erased(ctx, node, source, head)  # the source was erased: a tombstone
        return
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
    # Named as this session names nodes, to tell what it holds; each copy keeps
    # the id it had in the source under the attach node's prefix (``inner``).
    raw = projector.items_of(commit_id)
    items = rebase_items(projector.dag, raw, source, node.session_id)
    inner = {item.item_id: original.item_id for item, original in zip(items, raw, strict=True)}
    copies = [i for i in items if i.state != "summarized" and i.role != "marker"]
    if ctx.policy.generation >= 2:
        by_id = {i.item_id: i for i in items}
        copies = [_shown_in_full(i, by_id) for i in copies if not _shared(ctx, i, items)]
        if not copies:
            return  # everything the source shows, the target holds already
    ctx.add(_marker(node, "open", f"[Attached context from session {source}, head {head}]",
                    key, at, ctx.next_ord()))  # fmt: skip
    for item in copies:
        copy_id = f"{node.node_id}:{inner.get(item.item_id, item.item_id)}"
        copy = _copy(item, copy_id, ctx.next_ord(), key)
        if ctx.policy.generation >= 2:  # its own id, and maybe its own text: its own count
            copy.tokens = tokens_of(copy, ctx.policy)
        ctx.add(copy)
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
            ctx.rewrite(mine, item.rendered, item.call)
            ctx.retoken(mine, item.tokens)
            mine.merged_into = item.merged_into
            ctx.set_state(mine, item.state, "merge", f"peer commit {commit_id} holds it "
                          f"{item.state}")  # fmt: skip


def merge_peers(
    projector: Commits, ctx: WorkingContext, peer_commits: list[str], session_id: str
) -> None:
    peers = [(commit_id, projector.items_as(commit_id, session_id)) for commit_id in peer_commits]
    _adopt_tighter(ctx, peers)
    v2 = ctx.policy.generation >= 2
    owners: dict[str, str] = {}  # attach source -> the expansion staged under this head
    for item in ctx.ordered():
        if v2:
            ctx.frozen.add(item.item_id)
        elif not item.base_locked:
            item.base_locked = True
            ctx.set_locked(item, True)
        if item.attached_from:
            owners.setdefault(item.attached_from, _expansion(item))
    for _, items in peers:
        by_id = {i.item_id: i for i in items}
        chosen = [i for i in items if i.item_id not in ctx.items and not (
            v2 and (ctx.holds(i.source_node_id) or i.state == "summary"))]  # fmt: skip
        if v2:  # a peer's summary comes along only if it stands for something here
            wanted = {i.merged_into for i in [*ctx.items.values(), *chosen] if i.merged_into}
            keep = {i.item_id for i in chosen} | {i.item_id for i in items if i.state == "summary"
                                                  and i.item_id in wanted
                                                  and i.item_id not in ctx.items}  # fmt: skip
            chosen = [i for i in items if i.item_id in keep]
            # a block whose every item is held here already brings nothing:
            # not even its open and close markers
            staged = {i.attached_from for i in chosen if i.role != "marker"}
            chosen = [i for i in chosen if i.role != "marker" or i.attached_from in staged]
        for item in chosen:
            if item.attached_from:  # a source the base (or an earlier peer) staged: once
                owner = owners.setdefault(item.attached_from, _expansion(item))
                if owner != _expansion(item):
                    continue
            shown = item
            if v2 and item.dedup_of:
                original = ctx.items.get(item.dedup_of)
                if original is None or original.state != "full" or original.dedup_of:
                    shown = _shown_in_full(item, by_id)  # the reference would point nowhere
            peer = _copy(shown, item.item_id, ctx.next_ord(), item.attached_from)
            peer.merged_into = item.merged_into
            if shown is not item:
                peer.tokens = tokens_of(peer, ctx.policy)
            ctx.add(peer)


def rebase_items(dag: DagIndex, items: list[Item], owner: str, viewer: str) -> list[Item]:
    """``owner``'s commit items, renamed as ``viewer`` names their nodes.

    An item names its node as its commit's session does: by id when that
    session shows the node, else by key (``session/node id``).  Brought into
    another session (attach, merge), the same node must keep one name, and a
    node of another lineage that has an id ``viewer`` also uses must not take
    it: each reference is resolved where it was made and named again.
    """
    names: dict[str, str] = {}

    def rename(ref: str | None) -> str | None:
        if ref is None:
            return None
        if ref not in names:
            node = dag.find(owner, ref)
            names[ref] = dag.name_in(viewer, node) if node is not None else ref
        return names[ref]

    def rename_id(item_id: str | None) -> str | None:
        """An item id: a node's own, or ``<node>:<suffix>`` (markers, attached copies)."""
        if item_id is None:
            return None
        whole = rename(item_id)
        if whole != item_id or ":" not in item_id:
            return whole
        prefix, rest = item_id.split(":", 1)
        if dag.find(owner, prefix) is None:
            return item_id  # a summary's id, say
        return f"{rename(prefix)}:{rest}"

    out = []
    for item in items:
        copy = item.copy()
        copy.source_node_id = rename(item.source_node_id)
        copy.item_id = rename_id(item.item_id) or item.item_id
        copy.merged_into = rename_id(item.merged_into)
        copy.dedup_of = rename_id(item.dedup_of)
        out.append(copy)
    return out
