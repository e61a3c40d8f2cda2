"""What each event does to the projection, keyed by its class (``HANDLERS``).

A step is a function of the ``projections.projector.Projector`` applying
the event, the event, its ``EventInfo`` and the session's row.  Events that
add a node (a node, an attach, a merge) index it and build a commit on it;
the others change the session's row and, when what the head's context shows
changes (pins, model, tools, a summary), build a new commit at the head.
``Projector.apply`` looks the step up by the event's type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from domain import events as ev
from domain.working_context import WorkingContext
from projections.erasure import merge_erased
from projections.expansion import expand_attach, merge_peers
from projections.recall_rows import recall_row
from projections.records import EventInfo, NodeRow, SessionRow, dumps

if TYPE_CHECKING:
    from projections.projector import Projector

Step = Callable[["Projector", Any, EventInfo, SessionRow], None]

# ------------------------------------------------------------ node events


def _add_node(projector: Projector, info: EventInfo, session: SessionRow, **fields: Any) -> NodeRow:
    node = NodeRow(session_id=info.session_id, created_at=info.at, event_id=info.event_id,
                   notification_id=info.notification_id, **fields)  # fmt: skip
    projector.dag.add(node)
    if projector.working is not None:
        projector.working.grew(node.session_id)
    projector.outbox.nodes.append(node.to_row())
    recall = recall_row(node)
    if recall is not None:
        projector.outbox.recall.append(recall)
    session.head = node.node_id
    session.graph_position = info.notification_id
    return node


def on_node(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    parent = event.caller or event.predecessor
    node = _add_node(
        projector, info, session, node_id=event.node_id, seq=event.seq, role=event.role,
        name=event.name, input=event.input, output=event.output, parent=parent,
        edge="caller" if event.caller else ("predecessor" if parent else "root"),
        call_id=event.call_id, reads=list(event.reads), meta=dict(event.metadata),
        sibling_of=event.sibling_of, version_kind=event.version_kind,
        token_counts=event.token_counts,
    )  # fmt: skip
    projector.commit_node(node, info, session)


def on_attach(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    meta = {"source_session": event.source_session, "source_head": event.source_head,
            "commit": event.commit}  # fmt: skip
    node = _add_node(
        projector, info, session, node_id=event.node_id, seq=event.seq, role="attach", name=None,
        input=None, output=None, parent=event.predecessor,
        edge="predecessor" if event.predecessor else "root", call_id=None, reads=[],
        meta=meta, sibling_of=None, version_kind=None,
    )  # fmt: skip
    projector.commit_node(
        node, info, session, extra=lambda ctx: expand_attach(projector, ctx, node)
    )


def on_merge(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    meta = {"merge_id": event.merge_id, "peers": event.peers, "base": event.base}
    node = _add_node(
        projector, info, session, node_id=event.node_id, seq=event.seq, role="merge", name=None,
        input=None, output=None, parent=event.predecessor, edge="predecessor",
        call_id=None, reads=[], meta=meta, sibling_of=None, version_kind=None,
    )  # fmt: skip
    found = (projector.commit_at(peer.get("session_id", info.session_id), peer["node_id"])
             for peer in event.peers)  # fmt: skip
    peer_commits = [c for c in found if c is not None]
    # Items a peer already holds come in from that peer, as the peer has them,
    # rather than re-entering the base side as fresh items.
    held = {i.item_id for c in peer_commits for i in projector.items_as(c, info.session_id)}
    erased = [peer["session_id"] for peer in event.peers
              if peer.get("session_id", info.session_id) not in projector.dag.sessions]  # fmt: skip

    def merge(ctx: WorkingContext) -> None:
        merge_peers(projector, ctx, peer_commits, info.session_id)
        if erased:  # a peer session that was erased leaves a tombstone
            merge_erased(ctx, node, erased)

    projector.commit_node(node, info, session, extra_parents=peer_commits, skip=held,
                          extra=merge)  # fmt: skip


# ----------------------------------------------------------- other events


def on_head_moved(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    session.head = event.node_id
    session.graph_position = info.notification_id


def on_run(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    session.running = event.run_id if isinstance(event, ev.AgentRunStarted) else None


def on_model(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    session.model = event.model
    session.context_window = event.context_window
    session.graph_position = info.notification_id
    projector.recommit_head(info, session)


def on_pin(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    if isinstance(event, ev.NodePinned):
        session.pinned = sorted(set(session.pinned) | {event.node_id})
    else:
        session.pinned = sorted(set(session.pinned) - {event.node_id})
    projector.recommit_head(info, session)


def on_tools(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    session.tools = [dict(tool) for tool in event.tools]
    session.tools_row = None
    session.graph_position = info.notification_id
    projector.recommit_head(info, session)  # the head's budget counts the new definitions


def on_compaction(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    """The settings, shown by ``GET /sessions/{sid}``; a changed ``recall_tool`` recommits.

    Whether requests list ``recall`` changes what the budget counts, so, as a
    tool declaration does, a change makes a new head commit at once, whose
    guard folds with the tool counted (or not) from then on; commits already
    made are never rewritten.  Instructions and model change no commit.
    """
    before = (session.compaction or {}).get("recall_tool")
    settings = {"instructions": event.instructions, "summarizer_model": event.summarizer_model}
    if event.recall_tool is not None:  # only when set: a row from before it reads the same
        settings["recall_tool"] = event.recall_tool
    session.compaction = settings if any(v is not None for v in settings.values()) else None
    if event.recall_tool != before:
        session.graph_position = info.notification_id  # a usage report before it measured less
        projector.recommit_head(info, session)


def on_usage(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    projector.outbox.usage.append({
        "notification_id": info.notification_id, "session_id": info.session_id,
        "request_id": event.request_id, "head_node": event.head_node,
        "input_tokens": event.input_tokens, "cache_read": event.cache_read,
        "output_tokens": event.output_tokens, "provider": event.provider,
        "event_seq": info.seq, "cache_creation": event.cache_creation,
        "total_input": event.total_input, "convention": event.convention,
        "native": dumps(event.native) if event.native is not None else None,
    })  # fmt: skip


def on_summary(projector: Projector, event: Any, info: EventInfo, session: SessionRow) -> None:
    from domain.rules.summarize import fold_summary

    target = projector.commits.get(event.commit)
    head = target.head_node_id if target else session.head
    session.graph_position = info.notification_id

    def fold(ctx: WorkingContext) -> None:
        fold_summary(ctx, event.summary_id, list(event.covered), event.text, event.summarizer)

    projector.recommit_head(info, session, extra=fold, head=head)


# Keyed by the event class itself: a renamed or mistyped class is an import
# error, not an event the projection silently skips.
HANDLERS: dict[type, Step] = {
    ev.NodeAppended: on_node,
    ev.HeadMoved: on_head_moved,
    ev.AgentRunStarted: on_run,
    ev.AgentRunFinished: on_run,
    ev.ModelSwitched: on_model,
    ev.NodePinned: on_pin,
    ev.NodeUnpinned: on_pin,
    ev.AttachStaged: on_attach,
    ev.MergeCompleted: on_merge,
    ev.UsageMeasured: on_usage,
    ev.SummaryRecorded: on_summary,
    ev.CompactionConfigured: on_compaction,
    ev.ToolsDeclared: on_tools,
}
