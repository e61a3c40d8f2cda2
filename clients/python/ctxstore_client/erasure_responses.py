"""What the erasure routes answer (``api/routes_erasure.py``); imports nothing of the server."""

from __future__ import annotations

from ctxstore_client.responses import Answer


class SummaryTombstoned(Answer):
    session_id: str
    summary_id: str


class ErasureRecord(Answer):
    """One erasure: what went, who asked, when; ids and counts, never content."""

    session_id: str
    erased_sessions: list[str]
    events: int
    nodes: int
    referrers: list[str]
    tombstoned: list[SummaryTombstoned]
    by: str
    tenant: str
    erased_at: str


class Erased(ErasureRecord):
    compacted: bool
    reprojected: int  # other sessions whose projection rows were recomputed


class TenantErased(Answer):
    """``DELETE /tenant``: one record per session erased (with its branches)."""

    tenant: str
    erasures: list[ErasureRecord]
    erased_at: str
    compacted: bool
    reprojected: int


class ErasureList(Answer):
    erasures: list[ErasureRecord]
