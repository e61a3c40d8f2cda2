"""docs/client.md's Python examples run as written against a real server.

Each ``python`` block is run in its own process, with ``CTXSTORE_URL``
naming a real server (the blocks read it), twice: an example must not hold
a fixed idempotency key or anything else that fails the second time.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_its_examples() -> None:
    # the client loop, the Agents SDK session, LangChain agents, the recall tool
    assert len(BLOCKS) == 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_python_example_runs_as_written(live_server: str, tmp_path: Path,
                                             index: int) -> None:  # fmt: skip
    script = tmp_path / "example.py"
    script.write_text(BLOCKS[index], encoding="utf-8")
    env = {**os.environ, "CTXSTORE_URL": live_server}
    env.pop("CTXSTORE_API_KEY", None)
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    expected = ("x.py sets x to 1.", "You said: Hello", "nodes stored",
                "| user | summarized]\nOur ACME invoice number is INV-20931")[index]  # fmt: skip
    assert expected in out, out
