"""The application service: one method per command, nothing else.

Each method checks what needs no session, then hands ``SessionStore._command``
(``domain.session_store``) the aggregate method that validates and triggers
the events; loading, optimistic concurrency, retries and the one atomic save
are the store's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from domain import errors
from domain.batch import append_batch
from domain.limits import check_label, check_model, check_window
from domain.session import Session
from domain.session_store import RESULT, SessionStore
from domain.tenancy import DEFAULT_TENANT, check_owner, check_tenant


class CtxStore(SessionStore):
    """Event-sourced write side of ctxstore."""

    name = "ctxstore"
    snapshotting_intervals = {Session: 500}
    env = {
        "AGGREGATE_CACHE_MAXSIZE": "256",
        # Commands validate before triggering events, and a failed save evicts
        # the cached session, so copying a 10,000-node aggregate per command
        # would buy nothing.
        "DEEPCOPY_FROM_AGGREGATE_CACHE": "n",
        # A large text is JSON-encoded once, by its command (domain.splicing_transcoder).
        "TRANSCODER_TOPIC": "domain.splicing_transcoder:SplicingTranscoder",
        # A large state is stored zlib-compressed; an old one reads as before.
        "COMPRESSOR_TOPIC": "domain.state_compressor:StateCompressor",
    }

    # ------------------------------------------------------------- commands

    def start_session(
        self,
        title: str = "",
        model: str = "openai:gpt-4o",
        context_window: int | None = None,
        at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[UUID, int]:
        return self.import_session(title, model, context_window, at, lambda agg: None,
                                   tenant=tenant)  # fmt: skip

    def import_session(
        self, title: str, model: str, context_window: int | None, at: datetime | None,
        build: Callable[[Session], None], branched_from: dict[str, str] | None = None,
        tenant: str | None = None,
    ) -> tuple[UUID, int]:  # fmt: skip
        """A new session, with whatever ``build`` runs on it in memory, in one atomic write.

        A bulk import lands whole or not at all.  Saved a command at a time, a
        refusal halfway, a node id another session took meanwhile, or a
        database locked for too long left half a session stored, with no id
        printed, so a retry stored a second copy.
        """
        check_model(model)
        check_label("title", title)
        check_window(context_window)
        tenant = check_tenant(tenant if tenant is not None else DEFAULT_TENANT)
        if branched_from is not None:  # an exported branch: its source must be here
            source = self.session(branched_from["session_id"], tenant)
            ref = source.node(branched_from["node_id"])
            branched_from = {"session_id": branched_from["session_id"],
                             "node_id": ref.node_id, "role": ref.role}  # fmt: skip
        agg = Session._create(
            Session.Started, title=title, model=model, branched_from=branched_from,
            context_window=context_window, tenant=tenant, timestamp=at,
        )  # fmt: skip
        build(agg)
        self.refuse_inherited(agg, list(agg.nodes))
        RESULT.set((agg.id, agg.version))
        self._save(agg, added=list(agg.nodes))
        return agg.id, agg.version

    def branch(
        self, source_session: UUID | str, node_id: str, title: str | None = None,
        at: datetime | None = None, expected_version: int | None = None,
        tenant: str | None = None,
    ) -> tuple[UUID, int]:  # fmt: skip
        """A new session whose history is the source's chain up to ``node_id``.

        ``expected_version`` is checked against the source: branching from a
        chain the caller has not seen is as stale as writing to it.  The
        branch belongs to the source's tenant.
        """
        check_label("title", title)
        with self.locks.hold(source_session):
            source = self.session(source_session, tenant)
            source.expect_version(expected_version)
            ref = source.node(node_id)
            pinned = source.pins_on_chain(node_id)
        agg = Session._create(
            Session.Started,
            title=title if title is not None else f"{source.title} (branch)",
            model=source.model,
            branched_from={
                "session_id": str(source.id),
                "node_id": node_id,
                "role": ref.role,
                "pinned": pinned,
            },
            context_window=source.context_window,
            tenant=source.tenant,
            timestamp=at,
        )
        RESULT.set((agg.id, agg.version))
        self._save(agg)
        return agg.id, agg.version

    def append_node(
        self, session_id: UUID | str, expected_version: int | None = None,
        tenant: str | None = None, **kwargs: Any,
    ) -> tuple[str, int]:  # fmt: skip
        return self._command(session_id, expected_version, lambda s: s.append_node(**kwargs),
                             tenant)  # fmt: skip

    def append_nodes(
        self, session_id: UUID | str, nodes: Sequence[Mapping[str, Any]],
        expected_version: int | None = None, at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[list[str], int]:  # fmt: skip
        """Several nodes in one atomic write (``domain.batch``)."""
        return self._command(session_id, expected_version,
                             lambda s: append_batch(s, nodes, at), tenant)  # fmt: skip

    def add_sibling(
        self, session_id: UUID | str, of: str, kind: str, expected_version: int | None = None,
        tenant: str | None = None, **kwargs: Any,
    ) -> tuple[str, int]:  # fmt: skip
        return self._command(
            session_id, expected_version, lambda s: s.add_sibling(of, kind=kind, **kwargs), tenant
        )

    def checkout(
        self, session_id: UUID | str, node_id: str, version: int | None = None,
        expected_version: int | None = None, at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[str, int]:  # fmt: skip
        return self._command(
            session_id, expected_version, lambda s: s.checkout(node_id, version, at), tenant
        )

    def start_run(
        self, session_id: UUID | str, run_id: str | None = None,
        expected_version: int | None = None, at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[str, int]:  # fmt: skip
        return self._command(session_id, expected_version, lambda s: s.start_run(run_id, at),
                             tenant)  # fmt: skip

    def finish_run(
        self, session_id: UUID | str, status: str = "completed",
        expected_version: int | None = None, at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[None, int]:  # fmt: skip
        return self._command(session_id, expected_version, lambda s: s.finish_run(status, at),
                             tenant)  # fmt: skip

    def switch_model(
        self, session_id: UUID | str, model: str, context_window: int | None = None,
        expected_version: int | None = None, at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[None, int]:  # fmt: skip
        check_model(model)
        return self._command(
            session_id,
            expected_version,
            lambda s: s.switch_model(model, context_window, at),
            tenant,
        )

    def pin(
        self, session_id: UUID | str, node_id: str, expected_version: int | None = None,
        at: datetime | None = None, tenant: str | None = None,
    ) -> tuple[None, int]:  # fmt: skip
        return self._command(session_id, expected_version, lambda s: s.pin(node_id, at), tenant)

    def unpin(
        self, session_id: UUID | str, node_id: str, expected_version: int | None = None,
        at: datetime | None = None, tenant: str | None = None,
    ) -> tuple[None, int]:  # fmt: skip
        return self._command(session_id, expected_version, lambda s: s.unpin(node_id, at),
                             tenant)  # fmt: skip

    def attach(
        self, session_id: UUID | str, source_session: UUID | str,
        source_head: str | None = None, expected_version: int | None = None,
        at: datetime | None = None, tenant: str | None = None,
    ) -> tuple[str, int]:  # fmt: skip
        with self.locks.hold(source_session):  # never nested: see domain.session_locks
            source = self.session(source_session, tenant)
            head = source_head or source.head
            if head is None:
                raise errors.InvalidCommand("the source session has no nodes to attach")
            source.node(head)
        commit = self.commit_resolver(str(source.id), head)

        def stage(s: Session) -> str:
            # Whoever asks, a session never takes in another tenant's context.
            check_owner(source.tenant, s.tenant, str(source.id))
            return s.stage_attach(str(source.id), head, commit, at)

        return self._command(session_id, expected_version, stage, tenant)

    def merge(
        self, session_id: UUID | str, peers: list[dict[str, str]],
        expected_version: int | None = None, at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[str, int]:  # fmt: skip
        own = str(session_id)
        others: list[Session] = []
        for peer in peers:
            if peer.get("session_id", own) != own:
                with self.locks.hold(peer["session_id"]):
                    others.append(self.session(peer["session_id"], tenant))
                    others[-1].node(peer["node_id"])
        normalised = [
            {"session_id": peer.get("session_id", own), "node_id": peer["node_id"]}
            for peer in peers
        ]

        def merge(s: Session) -> str:
            for other in others:  # whoever asks, never another tenant's heads
                check_owner(other.tenant, s.tenant, str(other.id))
            return s.merge(normalised, at)

        return self._command(session_id, expected_version, merge, tenant)

    def measure_usage(
        self, session_id: UUID | str, expected_version: int | None = None,
        tenant: str | None = None, **kwargs: Any,
    ) -> tuple[int, int]:  # fmt: skip
        return self._command(session_id, expected_version, lambda s: s.measure_usage(**kwargs),
                             tenant)  # fmt: skip

    def configure_compaction(
        self, session_id: UUID | str, instructions: str | None = None,
        summarizer_model: str | None = None, expected_version: int | None = None,
        at: datetime | None = None, tenant: str | None = None,
        recall_tool: bool | None = None, only: Collection[str] | None = None,
    ) -> tuple[dict[str, Any], int]:  # fmt: skip
        """The settings as they now are (``only``: the ones this call changes)."""
        return self._command(
            session_id, expected_version,
            lambda s: s.configure_compaction(instructions, summarizer_model, at, recall_tool,
                                             only),
            tenant,
        )  # fmt: skip

    def declare_tools(
        self, session_id: UUID | str, tools: list[dict[str, Any]],
        expected_version: int | None = None, at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[None, int]:  # fmt: skip
        return self._command(session_id, expected_version, lambda s: s.declare_tools(tools, at),
                             tenant)  # fmt: skip

    def record_summary(
        self, session_id: UUID | str, covered: list[str], text: str, summarizer: str,
        commit: str, expected_version: int | None = None, at: datetime | None = None,
        tenant: str | None = None,
    ) -> tuple[str, int]:  # fmt: skip
        return self._command(
            session_id, expected_version,
            lambda s: s.record_summary(covered, text, summarizer, commit, at), tenant,
        )  # fmt: skip
