"""What a part of ``domain.session.Session`` split into its own module relies on.

``NodeCommands`` and ``ContextCommands`` are mixed into the aggregate; this
base declares, for the type checker, the state and methods they use of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from domain.nodes import NodeRef


class SessionPart:
    """Relies on the session's node index, HEAD and ``trigger_event``."""

    id: Any
    head: str | None
    model: str
    next_seq: int
    compaction: dict[str, Any]  # CompactionConfigured: the settings as they now are

    if TYPE_CHECKING:  # provided by Session; declared here for the type checker only

        def node(self, node_id: str) -> NodeRef: ...
        def knows(self, node_id: str) -> bool: ...
        def trigger_event(self, event_class: Any, **kwargs: Any) -> None: ...
        def _refuse_while_running(self, what: str) -> None: ...
