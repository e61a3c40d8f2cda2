"""Whether this process should get traffic: its schema is current and its projection close.

``/health`` says the process is alive; ``/ready`` (``api.routes_ops``) says
it can answer in time: every projection migration has run (a server started
before ``ctxstore migrate`` on a store left behind answers 503) and no
partition's stored projection is more than ``max_lag`` of its own events
behind the log (``projections.backlog``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from projections.backlog import backlog
from projections.migrate import alembic_config


@cache
def _heads(url: str) -> frozenset[str]:
    return frozenset(ScriptDirectory.from_config(alembic_config(url)).get_heads())


def migrated(runtime: Any) -> bool:
    with runtime.store.engine.connect() as conn:
        current = frozenset(MigrationContext.configure(conn).get_current_heads())
    return current == _heads(runtime.url)


def readiness(runtime: Any, max_lag: int) -> dict[str, Any]:
    """``{"ready": bool, "reason": str | None, "lag": {partition: events}}``."""
    if not migrated(runtime):
        return {"ready": False, "reason": "migrations have not run: ctxstore migrate", "lag": {}}
    lag = backlog(runtime.processor, cap=max_lag + 1)
    behind = {p: n for p, n in lag.items() if n > max_lag}
    reason = (f"the projection is behind by more than {max_lag} events in partition(s) "
              f"{sorted(behind)}" if behind else None)  # fmt: skip
    return {"ready": not behind, "reason": reason, "lag": {str(p): n for p, n in lag.items()}}
