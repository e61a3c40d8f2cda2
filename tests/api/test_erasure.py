"""``DELETE /sessions/{sid}``: the content is gone from every byte of the store.

A distinctive random marker goes into a session's title and node content,
into a summary another session recorded over an attached copy of it, and
into a merged copy in a third session.  After the erasure no table row (on
PostgreSQL, every table dumped as text) and no byte of the SQLite file and
its WAL holds it, nor any compressed value in them once decompressed; the
other sessions show tombstones; a rebuild equals the live projection; every
read of the erased session is 404.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from api.app import create_app
from domain.state_compressor import MAGIC, StateCompressor
from projections.packed_text import PREFIX, unpack
from projections.rebuild import rebuild_and_compare
from scripts import cli
from service.runtime import Runtime
from tests.api.test_commands import append, ok, start
from tests.conftest import immediate_policy


@pytest.fixture
def runtime(store_url: str) -> Iterator[Any]:
    """As tests/api/conftest.py's, at summary_target 0.25, the default these scenarios were
    written under: after an erasure the recorded summary folds again over what is left,
    and at a larger target these small sessions would have nothing left to fold."""
    rt = Runtime(store_url, policy=immediate_policy(summary_target=0.25))
    try:
        yield rt
    finally:
        rt.close()


def _store_text(url: str) -> bytes:
    """Everything the store holds: raw file bytes on SQLite, every row as text on PostgreSQL;
    with, on both, every row as it reads and every compressed value the bytes hold,
    decompressed (a compressed copy of the content would hide from a scan of raw bytes)."""
    if url.startswith("sqlite"):
        import sqlite3

        path = Path(url[len("sqlite:///") :])
        with sqlite3.connect(path) as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                                "WHERE type = 'table'")]  # fmt: skip
            dump = [_rows(conn.execute(f'SELECT * FROM "{n}"').fetchall()) for n in names]
        raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        return "\n".join(dump).encode() + raw + _decompressed(raw)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]  # fmt: skip
        dump = [_rows(conn.execute(f'SELECT * FROM "{n}"').fetchall()) for n in names]
        # Rows deleted but not yet vacuumed are invisible to SELECT: read the tables'
        # files themselves (heap and TOAST), flushed to disk first.
        conn.execute("CHECKPOINT")
        files = conn.execute(
            "SELECT pg_read_binary_file(pg_relation_filepath(c.oid)) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname IN ('public', 'pg_toast') AND c.relkind IN ('r', 't') "
            "AND pg_relation_filepath(c.oid) IS NOT NULL AND pg_relation_size(c.oid) > 0"
        ).fetchall()  # fmt: skip
    raw = b"".join(bytes(f[0]) for f in files)
    return "\n".join(dump).encode() + raw + _decompressed(raw)


def _rows(rows: list[Any]) -> str:
    """``rows`` as text, each compressed value (an event's state, a packed column) as it
    reads."""

    def plain(value: Any) -> Any:
        if isinstance(value, memoryview | bytes) and bytes(value).startswith(MAGIC):
            return StateCompressor().decompress(bytes(value))
        return unpack(value) if isinstance(value, str) else value

    return repr([[plain(v) for v in row] for row in rows])


_BASE64 = re.compile(rb"[A-Za-z0-9+/]+={0,2}")


def _decompressed(raw: bytes) -> bytes:
    """What each compressed value in ``raw`` holds, as far as its bytes run on (a value
    a page break splits is read up to the break)."""
    out = []
    for at in _found(raw, MAGIC):
        out.append(_inflate(raw[at : at + (1 << 22)]))
    for at in _found(raw, PREFIX.encode()):
        run = _BASE64.match(raw, at)
        if run:
            text = run.group()[: len(run.group()) // 4 * 4]
            out.append(_inflate(base64.b64decode(text)))
    return b"".join(out)


def _found(raw: bytes, mark: bytes) -> list[int]:
    starts, at = [], raw.find(mark)
    while at >= 0:
        starts.append(at + len(mark))
        at = raw.find(mark, at + 1)
    return starts


def _inflate(data: bytes) -> bytes:
    inflater, out = zlib.decompressobj(), []
    for i in range(0, len(data), 256):
        try:
            out.append(inflater.decompress(data[i : i + 256]))
        except zlib.error:
            break
        if inflater.eof:
            break
    return b"".join(out)


def _scenario(client: TestClient, marker: str) -> dict[str, Any]:
    """A: marked (and a branch of it); B attaches A and summarizes the copy; C merges A."""
    a = start(client, title=f"A {marker}")
    first = append(client, a, "user", input=f"the secret plan is {marker}, keep it close")
    for i in range(3):
        append(client, a, "assistant", output=f"noted {marker} round {i}, nothing else")
        append(client, a, "user", input=f"more about {marker} in round {i}")
    branch = ok(client.post(f"/sessions/{a}/branch", json={"node_id": first}), 201)["session_id"]
    append(client, branch, "assistant", output=f"a branch answer quoting {marker}")
    b = start(client, title="B")
    append(client, b, "user", input="hello from b")
    ok(client.post(f"/sessions/{b}/attach", json={"source_session": a}), 201)
    for i in range(6):
        append(client, b, "user", input=f"b asks {i}")
        append(client, b, "assistant", output=f"b answers {i}")
    compacted = ok(client.post(f"/sessions/{b}/compact", json={}), 201)
    c = start(client, title="C")
    append(client, c, "user", input="hello from c")
    head = ok(client.get(f"/sessions/{a}"))["head"]
    ok(client.post(f"/sessions/{c}/merge",
                   json={"peers": [{"session_id": a, "node_id": head}]}), 201)  # fmt: skip
    return {"a": a, "branch": branch, "b": b, "c": c, "summary": compacted["summary_id"]}


def test_delete_leaves_no_byte_of_the_content_and_tombstones_elsewhere(
    client: TestClient, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = "ERASEME" + secrets.token_hex(12)
    s = _scenario(client, marker)
    summary = [i for i in ok(client.get(f"/sessions/{s['b']}/context"))["items"]
               if i["item_id"] == s["summary"]]  # fmt: skip
    assert summary and marker in json.dumps(summary), "the summary quotes the attached copy"
    assert marker in ok(client.get(f"/sessions/{s['c']}/render")).__repr__()
    assert marker.encode() in _store_text(store_url)

    erased = ok(client.delete(f"/sessions/{s['a']}"))
    assert erased["session_id"] == s["a"] and erased["by"] == "local"
    assert set(erased["erased_sessions"]) == {s["a"], s["branch"]}
    assert set(erased["referrers"]) == {s["b"], s["c"]}
    assert erased["tombstoned"] == [{"session_id": s["b"], "summary_id": s["summary"]}]
    assert erased["events"] > 0 and erased["nodes"] == 8 and erased["compacted"] is True

    stored = _store_text(store_url)
    assert marker.encode() not in stored

    for sid, tombstone in ((s["b"], "Attached context"), (s["c"], "Merged context")):
        rendered = json.dumps(ok(client.get(f"/sessions/{sid}/render")))
        assert marker not in rendered
        assert f"[{tombstone} from session {s['a']} was erased]" in rendered
        assert marker not in json.dumps(ok(client.get(f"/sessions/{sid}/context")))
    context = json.dumps(ok(client.get(f"/sessions/{s['b']}/context")))
    assert "[Summary erased: it quoted content of erased session(s)" in context

    for sid in (s["a"], s["branch"]):
        for path in ("", "/render", "/events", "/context", "/timeline", "/dag", "/nodes"):
            response = client.get(f"/sessions/{sid}{path}")
            assert response.status_code == 404, (path, response.text)
            assert response.json()["error"]["code"] == "session_not_found"
    head = ok(client.get(f"/sessions/{s['b']}"))["head"]
    assert client.get(f"/sessions/{s['a']}/explain/{head}").status_code == 404
    assert cli.main(["export", s["a"], "--db", store_url]) == 2
    assert "session_not_found" in capsys.readouterr().err

    again = client.delete(f"/sessions/{s['a']}")
    assert again.status_code == 404 and again.json()["error"]["code"] == "session_not_found"
    trail = ok(client.get("/erasures"))["erasures"]
    assert [e["session_id"] for e in trail] == [s["a"]] and trail[0]["by"] == "local"
    assert marker not in json.dumps(trail)

    # The other sessions go on as before, and rebuilding gives the live tables.
    append(client, s["b"], "user", input="after the erasure")
    append(client, s["c"], "user", input="after the erasure too")
    assert rebuild_and_compare(store_url)["identical"] is True


def test_a_large_node_leaves_no_byte_either(client: TestClient, store_url: str) -> None:
    """On PostgreSQL its state is stored beside the events table (``pg_payloads``)."""
    marker = "ERASEBIG" + secrets.token_hex(12)
    a = start(client, title="A")
    append(client, a, "user", input=f"{marker} " * 8000)  # 200 KB
    b = start(client, title="B")
    append(client, b, "user", input="hello from b")
    ok(client.post(f"/sessions/{b}/attach", json={"source_session": a}), 201)
    append(client, b, "user", input="after the attach")
    assert marker.encode() in _store_text(store_url)
    if store_url.startswith("sqlite"):  # the event and node row hold it compressed: the
        # scan must decompress (recall keeps only its index, revision 0014)
        path = Path(store_url[len("sqlite:///") :])
        raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        assert marker.encode() in _decompressed(raw)
    ok(client.delete(f"/sessions/{a}"))
    assert marker.encode() not in _store_text(store_url)
    assert marker not in json.dumps(ok(client.get(f"/sessions/{b}/render")))
    append(client, b, "user", input="after the erasure")
    assert rebuild_and_compare(store_url)["identical"] is True


def test_an_unknown_or_malformed_session_is_404(client: TestClient) -> None:
    for sid in ("00000000-0000-0000-0000-000000000000", "not-a-session"):
        response = client.delete(f"/sessions/{sid}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "session_not_found"


def test_the_audit_row_names_the_callers_key(runtime: Any) -> None:
    from service.api_keys import KeyStore

    key, secret = KeyStore(runtime.store.engine).create("acme", "admin")
    with TestClient(create_app(runtime), base_url="http://localhost",
                    headers={"Authorization": f"Bearer {secret}"}) as keyed:  # fmt: skip
        sid = start(keyed)
        append(keyed, sid, "user", input="hello")
        assert ok(keyed.delete(f"/sessions/{sid}"))["by"] == key.key_id
        assert ok(keyed.get("/erasures"))["erasures"][0]["by"] == key.key_id


def test_another_tenant_cannot_erase_or_see_the_erasure(runtime: Any) -> None:
    from service.api_keys import KeyStore

    keys = KeyStore(runtime.store.engine)
    admin = {t: {"Authorization": f"Bearer {keys.create(t, 'admin')[1]}"} for t in ("a", "b")}
    with TestClient(create_app(runtime), base_url="http://localhost") as client:
        sid = client.post("/sessions", json={}, headers=admin["a"]).json()["session_id"]
        refused = client.delete(f"/sessions/{sid}", headers=admin["b"])
        assert refused.status_code == 404
        assert client.get(f"/sessions/{sid}", headers=admin["a"]).status_code == 200
        assert client.delete(f"/sessions/{sid}", headers=admin["a"]).status_code == 200
        assert [e["session_id"] for e in client.get("/erasures", headers=admin["a"]).json()[
            "erasures"]] == [sid]  # fmt: skip
        assert client.get("/erasures", headers=admin["b"]).json()["erasures"] == []
