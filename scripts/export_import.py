"""Load a ``ctxstore export`` back: the same session again, under a new session id.

An export is the session's event log, one event a line.  Each event is
replayed as the command that recorded it (``append_node``, ``add_sibling``
with its kind, ``checkout``, ``pin``, ``merge``, ``record_summary``, ...) on
a new session in memory, with its recorded time and ids, and the whole
session is saved in one write, as a transcript import is: the domain
checks every step again, so a hand-edited file cannot store what the API
would refuse.  Node ids stay as in the file (they must be free in this
store); the head, the versions and every commit come out the same.

Two things name the session itself and are renamed: a merge's own-session
peers, and the commit a summary was computed for (a commit id derives from
its session id; the summary is re-pointed at the new session's commit at
the same head and event).  Sessions the export refers to (the source of a
branch, of an attach, a merge peer elsewhere) must be in this store under
the ids the file names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.application import CtxStore
from domain.errors import DomainError
from domain.session import Session
from projections.context_commit import commit_id_for
from scripts.transcript import TranscriptError, at_line

JSON = dict[str, Any]
EXPORT_KEYS = frozenset({"seq", "type", "timestamp", "data"})
# Events after which the projection makes a commit at the head.
COMMITTING = frozenset({"NodeAppended", "AttachStaged", "MergeCompleted", "ModelSwitched",
                        "NodePinned", "NodeUnpinned", "SummaryRecorded",
                        "ToolsDeclared"})  # fmt: skip


def is_export(record: Any) -> bool:
    return isinstance(record, dict) and set(record) == EXPORT_KEYS


def read_export(lines: list[tuple[int, str]]) -> list[JSON]:
    records: list[JSON] = []
    for number, raw in lines:
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise TranscriptError(f"line {number}: not valid JSON: {exc}", line=number) from None
        if not is_export(record):
            raise TranscriptError(f"line {number}: not an export line (seq, type, timestamp, "
                                  "data)", line=number)  # fmt: skip
        if record["seq"] != len(records) + 1:
            raise TranscriptError(f"line {number}: seq {record['seq']} where "
                                  f"{len(records) + 1} was due", line=number)  # fmt: skip
        records.append({**record, "line": number})
    if not records or records[0]["type"] != "SessionStarted":
        raise TranscriptError("line 1: an export starts with its SessionStarted event", line=1)
    return records


class Replayer:
    """Runs each exported event as its command on the new session in memory."""

    def __init__(self, app: CtxStore, agg: Session) -> None:
        self.app, self.agg = app, agg
        self.old_id: str | None = None  # the exported session's own id, once a merge names it
        self.commit_seq: dict[str, int] = {}  # head node -> last event that committed there

    def run(self, record: JSON) -> None:
        kind, data = record["type"], record["data"]
        at = datetime.fromisoformat(record["timestamp"])
        handler = HANDLERS.get(kind)
        if handler is None:
            raise TranscriptError(f"unknown event type {kind!r}")
        handler(self, data, at)
        if kind in COMMITTING and self.agg.head is not None:
            self.commit_seq[self.agg.head] = self.agg.version

    def node(self, d: JSON, at: datetime) -> None:
        content = {k: d.get(k) for k in ("input", "output", "name", "metadata")}
        if d.get("sibling_of"):
            self.agg.add_sibling(d["sibling_of"], kind=d.get("version_kind") or "edit",
                                 node_id=d["node_id"], at=at, **content)  # fmt: skip
            return
        self.agg.append_node(d["role"], node_id=d["node_id"], predecessor=d.get("predecessor"),
                             caller=d.get("caller"), call_id=d.get("call_id"),
                             reads=d.get("reads"), at=at, **content)  # fmt: skip

    def attach(self, d: JSON, at: datetime) -> None:
        source = self.app.session(d["source_session"], self.agg.tenant)  # here, same tenant
        source.node(d["source_head"])
        commit = self.app.commit_resolver(str(source.id), d["source_head"])
        self.agg.stage_attach(str(source.id), d["source_head"], commit, at, node_id=d["node_id"])

    def merge(self, d: JSON, at: datetime) -> None:
        self.old_id = d["base"]["session_id"]
        own = str(self.agg.id)
        peers = [{"session_id": own if p["session_id"] == self.old_id else p["session_id"],
                  "node_id": p["node_id"]} for p in d["peers"]]  # fmt: skip
        for peer in peers:
            if peer["session_id"] != own:
                self.app.session(peer["session_id"], self.agg.tenant).node(peer["node_id"])
        self.agg.merge(peers, at, merge_id=d["merge_id"], node_id=d["node_id"])

    def usage(self, d: JSON, at: datetime) -> None:
        fields = {"request_id": d["request_id"], "head_node": d["head_node"],
                  "provider": d["provider"], "at": at}  # fmt: skip
        if d.get("native") is not None:
            self.agg.measure_usage(usage=d["native"], **fields)
            return
        self.agg.measure_usage(input_tokens=d["input_tokens"], cache_read=d["cache_read"],
                               cache_creation=d.get("cache_creation", 0),
                               output_tokens=d["output_tokens"], **fields)  # fmt: skip

    def summary(self, d: JSON, at: datetime) -> None:
        head = self.agg.head
        seq = self.commit_seq.get(head) if head is not None else None
        # the new session's commit at the same head and event, when it made one there
        commit = commit_id_for(f"{self.agg.id}:{seq}", head) if head and seq else d["commit"]
        self.agg.record_summary(list(d["covered"]), d["text"], d["summarizer"], commit, at,
                                summary_id=d["summary_id"])  # fmt: skip


HANDLERS: dict[str, Callable[[Replayer, JSON, datetime], Any]] = {
    "NodeAppended": Replayer.node,
    "HeadMoved": lambda r, d, at: r.agg.checkout(d["node_id"], at=at),
    "AgentRunStarted": lambda r, d, at: r.agg.start_run(d["run_id"], at),
    "AgentRunFinished": lambda r, d, at: r.agg.finish_run(d["status"], at),
    "ModelSwitched": lambda r, d, at: r.agg.switch_model(d["model"], d.get("context_window"), at),
    "NodePinned": lambda r, d, at: r.agg.pin(d["node_id"], at),
    "NodeUnpinned": lambda r, d, at: r.agg.unpin(d["node_id"], at),
    "AttachStaged": Replayer.attach,
    "MergeStarted": lambda r, d, at: None,  # the merge command records both halves
    "MergeCompleted": Replayer.merge,
    "UsageMeasured": Replayer.usage,
    "SummaryRecorded": Replayer.summary,
    "ToolsDeclared": lambda r, d, at: r.agg.declare_tools(d["tools"], at),
    "CompactionConfigured": lambda r, d, at: r.agg.configure_compaction(
        d["instructions"], d["summarizer_model"], at
    ),
}


def import_export(app: CtxStore, records: list[JSON], tenant: str | None = None) -> UUID:
    """The exported session, recreated under a new id in one write; its id.

    It belongs to ``tenant``, else to the tenant it was exported from.
    """
    head, *rest = records
    started = head["data"]

    def build(agg: Session) -> None:
        replayer = Replayer(app, agg)
        for record in rest:
            try:
                replayer.run(record)
            except DomainError as exc:
                raise at_line(exc, record["line"]) from None
        if agg.version != len(records):
            raise TranscriptError(f"the export has {len(records)} events but replaying them "
                                  f"made {agg.version}")  # fmt: skip

    try:
        sid, _ = app.import_session(
            started.get("title") or "", started["model"], started.get("context_window"),
            datetime.fromisoformat(head["timestamp"]), build,
            branched_from=started.get("branched_from"), tenant=tenant or started.get("tenant"),
        )  # fmt: skip
    except DomainError as exc:
        if "line" in exc.details:
            raise
        lines = {r["data"].get("node_id"): r["line"] for r in rest}
        raise at_line(exc, lines.get(exc.details.get("node_id"), head["line"])) from None
    return sid
