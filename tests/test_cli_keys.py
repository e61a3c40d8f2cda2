"""``ctxstore keys create | list | revoke``: the secret is printed once and stored hashed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from domain.store_config import sqlalchemy_url
from scripts import cli
from service.api_keys import KeyStore


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_create_list_revoke(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    status, secret, err = run(capsys, "keys", "create", "--tenant", "acme", "--scope", "write",
                              "--db", store_url)  # fmt: skip
    assert status == 0, err
    secret = secret.strip()
    assert secret.startswith("ctx_") and len(secret) > 40
    key_id = err.split()[1]
    status, listed, _ = run(capsys, "keys", "list", "--db", store_url)
    assert status == 0 and key_id in listed and "acme" in listed and "write" in listed
    assert secret not in listed
    engine = create_engine(sqlalchemy_url(store_url))
    try:
        with engine.connect() as conn:
            rows = [tuple(r) for r in conn.execute(text("SELECT * FROM ctx_api_keys"))]
        assert secret not in repr(rows)
        assert hashlib.sha256(secret.encode()).hexdigest() in repr(rows)
        assert KeyStore(engine).resolve(secret) is not None
        assert run(capsys, "keys", "revoke", key_id, "--db", store_url)[0] == 0
        assert KeyStore(engine).resolve(secret) is None
    finally:
        engine.dispose()
    assert "revoked" in run(capsys, "keys", "list", "--db", store_url)[1]


def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    status, _, err = run(capsys, "keys", "create", "--tenant", "a/b", "--scope", "read",
                         "--db", store_url)  # fmt: skip
    assert status == 2 and "invalid_command" in err
    assert run(capsys, "keys", "create", "--tenant", "a", "--scope", "root", "--db",
               store_url)[0] == 2  # fmt: skip
    status, _, err = run(capsys, "keys", "revoke", "nope", "--db", store_url)
    assert status == 2 and "not_found" in err


def test_import_into_a_tenant(capsys: pytest.CaptureFixture[str], store_url: str,
                              tmp_path: Path) -> None:  # fmt: skip
    from domain.application import CtxStore

    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "session", "title": "t", "model": "openai:gpt-4o"}\n'
                    '{"type": "node", "role": "user", "input": "hi"}\n')  # fmt: skip
    status, out, err = run(capsys, "import", str(path), "--tenant", "acme", "--db", store_url)
    assert status == 0, err
    sid = out.strip()
    exported = tmp_path / "e.jsonl"
    assert run(capsys, "export", sid, "--db", store_url, "--out", str(exported))[0] == 0
    plain = run(capsys, "import", str(path), "--db", store_url)[1].strip()
    app = CtxStore(url=store_url)
    try:
        assert [app.session(s).tenant for s in (sid, plain)] == ["acme", "default"]
    finally:
        app.close()
    elsewhere = f"sqlite:///{tmp_path}/elsewhere.db"  # an export keeps its tenant
    again = run(capsys, "import", str(exported), "--db", elsewhere)[1].strip()
    app = CtxStore(url=elsewhere)
    try:
        assert app.session(again).tenant == "acme"
    finally:
        app.close()
