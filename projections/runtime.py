"""Wires the event-sourced application to its projections (SKELETON).

This file is being written by the projection owner; the method list and
return shapes below are the contract the API codes against.
"""

from __future__ import annotations

from typing import Any

from domain.application import CtxStore


class Runtime:
    """One process's handle on the store: commands, catch-up, queries."""

    app: CtxStore

    def __init__(self, url: str | None = None, *, auto_catch_up: bool = True,
                 summarizer: Any = None, policy: Any = None) -> None:  # fmt: skip
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def execute(self, command: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``CtxStore.<command>(*args, **kwargs)``, then catch the projections up.

        Returns what the application method returned (usually ``(result, version)``).
        """
        raise NotImplementedError

    def catch_up(self) -> int:
        """Apply every new notification to the projections; returns how many."""
        raise NotImplementedError

    def position(self) -> int:
        """The tracking position: the last notification id the projections applied."""
        raise NotImplementedError

    # Queries. Unknown session -> domain.errors.SessionNotFound; unknown node or
    # commit -> domain.errors.NodeNotFound / NotFound.
    def head_commit(self, session_id: str) -> dict[str, Any]:
        """{id, session_id, parent_ids, head_node_id, rules_version, total_tokens,
        event_id, event_seq, summary_request, items: [{item_id, source_node_id, role,
        state, locked, rendered, tokens, reason, merged_into, is_anchor, attached_from,
        name, ...}]}"""
        raise NotImplementedError

    def commit(self, session_id: str, commit_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def rendered(self, session_id: str, shape: str = "neutral",
                 commit_id: str | None = None) -> dict[str, Any]:  # fmt: skip
        """shape in {"neutral", "openai", "anthropic"}; ValueError otherwise."""
        raise NotImplementedError

    def timeline(self, session_id: str) -> list[dict[str, Any]]:
        """[{commit_id, head_node_id, parent_ids, event_seq, total_tokens, counts:{state:n}}]"""
        raise NotImplementedError

    def explain(self, session_id: str, node_id: str) -> dict[str, Any]:
        """{node_id, session_id, transitions:[{item_id, from_state, to_state, rule,
        rules_version, event_id, event_seq, commit_id, inputs}]}"""
        raise NotImplementedError

    def occupancy(self, session_id: str) -> dict[str, Any]:
        """{window, total_used, basis: "measured"|"estimated", estimated: int,
        calibration: float|None, head_node_id, model}"""
        raise NotImplementedError

    def budget(self, session_id: str) -> dict[str, Any]:
        """{window, system, history, tools, output_reserve, used:{...},
        compact_at, emergency_at, status: "ok"|"compact"|"emergency"}"""
        raise NotImplementedError

    def dag(self, session_id: str) -> dict[str, Any]:
        """{session_id, head, nodes:[{node_id, seq, role, name, parent, edge,
        version: N, versions: M, sibling_ids}]}"""
        raise NotImplementedError

    def compact(self, session_id: str, expected_version: int | None = None) -> dict[str, Any]:
        """Summarize the run the head commit asks for; records SummaryRecorded.
        domain.errors.NothingToCompact (409) when no run is eligible."""
        raise NotImplementedError
