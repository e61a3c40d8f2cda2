"""The client installs alone: its wheel, in a fresh virtualenv, drives a real server.

The wheel is built from ``clients/python`` (``pip wheel --no-deps``) and
installed into a new virtualenv with its own dependencies only (httpx and
pydantic, from the package index); the server's packages and modules must
not be importable there.  A script then drives a real server with the
blocking and the asyncio client.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, importlib.util, sys
for name in ("api", "domain", "service", "projections", "scripts", "sqlalchemy",
             "eventsourcing", "starlette", "tiktoken", "psycopg", "uvicorn"):
    assert importlib.util.find_spec(name) is None, f"{name} is importable"
from ctxstore_client import AsyncClient, Client, InvalidRequest
from ctxstore_client.context_responses import Rendered

base = sys.argv[1]
with Client(base) as ctx:
    created = ctx.start_session("wheel", "acme:unknown")
    sid = created.session_id
    assert "acme:unknown" in created.warnings[0]
    ctx.declare_tools(sid, [{"name": "read_file", "description": "Read a file"}])
    ctx.append_node(sid, "user", input="Read x.py")
    turn = ctx.append_node(sid, "assistant", output="reading").node_id
    ctx.append_node(sid, "tool", caller=turn, name="read_file", input={"path": "x.py"},
                    output="x = 1")
    rendered = ctx.render(sid, shape="openai")
    assert isinstance(rendered, Rendered) and rendered.warnings
    assert [m["role"] for m in rendered.request["messages"]] == ["user", "assistant", "tool"]
    assert ctx.budget(sid).window == ctx.models().default_window
    assert [t["name"] for t in ctx.tools(sid).tools] == ["read_file"]
    try:
        ctx.append_node(sid, "user", input=[{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "!!!notbase64"}}])
    except InvalidRequest as refused:
        assert refused.code == "invalid_content_block", refused.code
    else:
        raise AssertionError("a broken image was stored")

async def main() -> None:
    async with AsyncClient(base) as actx:
        assert (await actx.get_session(sid)).counts.nodes == 3
        assert (await actx.context(sid)).items

asyncio.run(main())
print("client wheel ok")
"""


@pytest.fixture(scope="module")
def client_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv holding the client's wheel and its dependencies, nothing else."""
    folder = tmp_path_factory.mktemp("client-wheel")
    wheels = folder / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                    str(ROOT / "clients" / "python")], check=True)  # fmt: skip
    [wheel] = wheels.glob("ctxstore_client-*.whl")
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(wheel)], check=True)  # fmt: skip
    yield python


def test_the_client_wheel_alone_drives_a_real_server(client_python: Path, live_server: str,
                                                     tmp_path: Path) -> None:  # fmt: skip
    script = tmp_path / "drive.py"
    script.write_text(SCRIPT)
    done = subprocess.run([str(client_python), str(script), live_server], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "client wheel ok"
    listed = subprocess.run([str(client_python), "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    installed = {line.split("==")[0].lower() for line in listed.split()}
    assert "ctxstore-client" in installed
    assert not installed & {"ctxstore", "sqlalchemy", "eventsourcing", "starlette", "tiktoken"}
