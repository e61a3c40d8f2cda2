"""The context as it stood at any event: the live projector, run in memory, stopped there.

``ctxstore replay SESSION --to N --render openai`` must print exactly what
``/render`` answered right after the session's N-th event.  So this runs
the very same ``Projector`` over the log, in log order, up to that event,
with the rules history the live projection recorded, and writes nothing:
commit rows it makes stay in memory (the port ``load_rows`` reads them
back), and the projection tables are only read for the rules history.

Only the sessions the target depends on are projected: itself, the session
it branched from, and the sessions it attached or merged from, and theirs
in turn.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from domain import errors
from domain import events as ev
from domain.application import CtxStore
from domain.context import ContextCommit
from domain.policy import Policy
from domain.render import render_shape
from domain.rules.summarize import with_item_ids
from domain.tool_specs import recall_listed
from projections.projector import Projector
from projections.records import Outbox, SessionRow
from projections.store import ProjectionStore

PAGE = 1_000


def related_sessions(app: CtxStore, session_id: str) -> set[str]:
    """``session_id`` and every session its context can draw on (transitively)."""
    seen: set[str] = set()
    todo = [session_id]
    while todo:
        sid = todo.pop()
        if sid in seen:
            continue
        seen.add(sid)
        for event in app.events_of(UUID(sid)):
            todo += _referenced(event)
    return seen


def _referenced(event: Any) -> Iterable[str]:
    if isinstance(event, ev.SessionStarted) and event.branched_from:
        yield event.branched_from["session_id"]
    elif isinstance(event, ev.AttachStaged):
        yield event.source_session
    elif isinstance(event, ev.MergeCompleted):
        yield from (str(p["session_id"]) for p in event.peers)


def _policies(store: ProjectionStore | None) -> tuple[list[int], list[Policy]]:
    history = store.policy_history() if store is not None else []
    if not history:
        history = [(0, Policy.from_env())]
    return [start for start, _ in history], [policy for _, policy in history]


def context_at(app: CtxStore, store: ProjectionStore | None, session_id: str,
               version: int) -> tuple[ContextCommit, SessionRow]:  # fmt: skip
    """The head commit of ``session_id`` right after its event ``version``, and the session."""
    session = app.session(session_id)
    sid = str(session.id)
    if not 1 <= version <= session.version:
        raise errors.InvalidCommand(f"--to must be within 1..{session.version} for this session")
    wanted = related_sessions(app, sid)
    starts, policies = _policies(store)
    stored: dict[str, list[dict[str, Any]]] = {}  # checkpoint id -> commit rows made so far
    tool_sets: dict[str, str] = {}  # ctx_tool_sets: key -> the declared tools' JSON

    def policy_at(notification_id: int) -> Policy:
        return policies[max(bisect.bisect_right(starts, notification_id) - 1, 0)]

    projector = Projector(policy_at, lambda checkpoint: list(stored.get(checkpoint, [])))
    position = 0
    done = False
    while not done:
        notes = app.recorder.select_notifications(start=position + 1, limit=PAGE)
        if not notes:
            break
        for note in notes:
            position = note.id
            if str(note.originator_id) not in wanted:
                continue  # other sessions, node-id claims
            projector.apply(app.mapper.to_domain_event(note), note.id)
            if str(note.originator_id) == sid and note.originator_version == version:
                done = True
                break
        for made in projector.pending.values():  # as the processor's write would keep them
            stored.setdefault(made["checkpoint_id"], []).append(made)
        tool_sets.update(projector.outbox.tool_sets)
        projector.pending.clear()
        projector.outbox = Outbox()
    row = projector.dag.sessions[sid]
    commit_id = projector.commit_at(sid, row.head) if row.head else None
    if commit_id is None:
        raise errors.NotFound(f"the session has no commit at event {version}: no node yet")
    return _commit(projector, commit_id, tool_sets), row


def _commit(projector: Projector, commit_id: str,
            tool_sets: dict[str, str] | None = None) -> ContextCommit:  # fmt: skip
    meta = projector.commits[commit_id]
    row = next(r for r in projector.rows_for(meta.checkpoint_id) if r["commit_id"] == commit_id)
    items = tuple(projector.items_of(commit_id))
    request = json.loads(row["summary_request"]) if row["summary_request"] else None
    return ContextCommit(
        id=commit_id, session_id=row["session_id"], parent_ids=tuple(json.loads(row["parent_ids"])),
        head_node_id=row["head_node_id"], rules_version=row["rules_version"],
        total_tokens=row["total_tokens"], event_id=row["event_id"], event_seq=row["event_seq"],
        created_at=row["created_at"], items=items,
        summary_request=with_item_ids(request, items) if request else None,
        tools=tuple(json.loads(tool_sets[row["tools"]]))
        if tool_sets and row.get("tools") else (),
    )  # fmt: skip


def request_at(app: CtxStore, store: ProjectionStore | None, session_id: str, version: int,
               shape: str) -> dict[str, Any]:  # fmt: skip
    """The provider request ``/render?shape=`` gave right after event ``version``: its
    declared tools, and the tool list the commit's policy and the session's
    ``recall_tool`` made (``service.runtime_queries``); secrets are not masked."""
    commit, session = context_at(app, store, session_id, version)
    policies = _policies(store)[1]
    policy = next(
        (p for p in reversed(policies) if p.rules_version == commit.rules_version), policies[-1]
    )  # as ``Processor.policy_of`` finds it
    return render_shape(
        commit,
        shape,
        session.model,
        False,
        policy.drop_summarized_tools,
        recall_listed(session.compaction, policy.recall_tool),
    )
