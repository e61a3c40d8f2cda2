"""A store written before UsageMeasured v2 upgrades without loss."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import create_engine, text

from domain.state_compressor import StateCompressor
from domain.store_config import sqlalchemy_url
from projections.migrate import upgrade
from service.runtime import Runtime


def test_revision_0006_gives_old_rows_their_old_total(store_url: str) -> None:
    upgrade(store_url, "0004")
    engine = create_engine(sqlalchemy_url(store_url))
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO ctx_usage (notification_id, session_id, request_id, head_node, "
            "input_tokens, cache_read, output_tokens, provider, event_seq) VALUES "
            "(7, 's', 'r', 'n', 4200, 800, 9, 'openai', 3)"))  # fmt: skip
    # 0009: revision 0010 rebuilds the projections from the events, and this
    # row was written without any
    upgrade(store_url, "0009")
    with engine.connect() as conn:
        row = conn.execute(text("SELECT total_input, cache_creation, convention, native "
                                "FROM ctx_usage")).one()  # fmt: skip
    engine.dispose()
    assert tuple(row) == (5000, 0, "flat", None)


def test_a_v1_usage_event_in_the_log_projects_as_it_did(store_url: str) -> None:
    rt = Runtime(store_url, auto_compact=False)
    try:
        sid, _ = rt.execute("start_session", title="old")
        rt.execute("append_node", sid, role="user", input="hi", node_id="old-u1")
        rt.execute("measure_usage", sid, request_id="r", input_tokens=4200, cache_read=800)
        app = rt.app
        [v2] = app.recorder.select_events(sid, gt=2)
        state = app.mapper.transcoder.decode(StateCompressor().decompress(v2.state))  # as stored
        state.update(class_version=1, input_tokens=1000, cache_read=24)
        for key in ("cache_creation", "total_input", "convention", "native"):
            del state[key]
        v1 = replace(v2, originator_version=4, state=app.mapper.transcoder.encode(state))
        app.recorder.insert_events([v1])  # as a store written by the old code holds it
        occupancy = rt.occupancy(str(sid))
        assert occupancy["basis"] == "measured" and occupancy["total_used"] == 1024
    finally:
        rt.close()
