"""The docs tell the truth: their examples run, and what they list is what the code has.

Every ``sh`` and ``python`` example of the README and of ``docs/`` runs against a real server
(``ctxstore demo`` on an ephemeral port, SQLite), in page order, a page's shell examples in one
shell (so a variable set in one is there in the next). An example that must not run (it
installs, serves forever, or turns API keys on) is followed by ``<!-- docs-test: skip (why) -->``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import _free_port, wait_until_up

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```[ \t]*\n(?P<after>[^\n]*)", re.M | re.S)
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\b")
SHELLS, PYTHONS = {"sh", "bash", "shell"}, {"python", "py"}
DOCUMENTED_PORT = "127.0.0.1:8000"
SETTING = re.compile(r"CTXSTORE_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*])")  # not a CTXSTORE_LANE_* prefix
CODE_DIRS = ("domain", "projections", "service", "api", "telemetry", "clients", "scripts", "tests")


def examples(page: Path) -> list[tuple[str, str]]:
    """(language, code) of each runnable example of ``page``, in order."""
    found = []
    for match in FENCE.finditer(page.read_text(encoding="utf-8")):
        lang = match["lang"]
        if SKIP.search(match["after"]) or lang not in SHELLS | PYTHONS:
            continue
        found.append(("sh" if lang in SHELLS else "python", match["code"]))
    return found


RUNNABLE = [page for page in PAGES if examples(page)]


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """``ctxstore demo`` on a loopback port over a fresh SQLite file: its address and the
    environment examples run in."""
    folder = tmp_path_factory.mktemp("docs")
    port = _free_port()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=path,
               CTXSTORE_DATABASE_URL=f"sqlite:///{folder / 'ctxstore.db'}")  # fmt: skip
    env.pop("CTXSTORE_POLICY", None)  # the docs speak of the default rules
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "demo", "--port", str(port)],
        cwd=folder, env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, base, seconds=120)
        yield f"127.0.0.1:{port}", {**env, "DOCS_FOLDER": str(folder)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_run(page: Path, demo_server: tuple[str, dict[str, str]]) -> None:
    address, env = demo_server
    shell = ["set -euo pipefail"]
    for lang, code in examples(page):
        code = code.replace(DOCUMENTED_PORT, address)
        if lang == "sh":
            shell.append(code)
            continue
        ran = subprocess.run([sys.executable, "-c", code], cwd=env["DOCS_FOLDER"], env=env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert ran.returncode == 0, f"{page.name}: python example failed:\n{code}\n{ran.stderr}"
    if len(shell) > 1:
        ran = subprocess.run(["bash", "-c", "\n".join(shell)], cwd=env["DOCS_FOLDER"], env=env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert ran.returncode == 0, f"{page.name}: shell examples failed:\n{ran.stdout}\n" + (
            ran.stderr
        )


def test_the_readme_tour_has_its_steps() -> None:
    """The tour runs (above); here, that it still has what the README promises."""
    code = "\n".join(code for _, code in examples(ROOT / "README.md"))
    for step in ("POST $CTX/sessions ", "/nodes ", "/nodes/batch", '"caller"', '"call_id"',
                 "/render?shape=openai", "/explain/"):  # fmt: skip
        assert step in code, step
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def _code_settings() -> set[str]:
    names: set[str] = set()
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            names |= set(SETTING.findall(path.read_text("utf-8")))
    return names


def test_every_setting_the_code_reads_is_documented() -> None:
    documented = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    names = _code_settings()
    assert "CTXSTORE_DATABASE_URL" in names
    assert sorted(n for n in names if f"`{n}`" not in documented) == []


def test_the_api_reference_is_generated_from_the_current_schema() -> None:
    from scripts import api_docs

    assert api_docs.main(["--check"]) == 0, "run: python -m scripts.api_docs"


def test_every_command_field_is_described_in_its_schema() -> None:
    from api import openapi
    from api.app import ENDPOINTS

    spec = openapi.document(ENDPOINTS)
    schemas = spec["components"]["schemas"]
    missing = []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            ref = body.get("schema", {}).get("$ref")
            if ref is None:
                continue
            for name, prop in schemas[ref.rsplit("/", 1)[1]].get("properties", {}).items():
                if not prop.get("description"):
                    missing.append(f"{method.upper()} {path}: {name}")
    assert missing == []


def _commands() -> dict[str, argparse.ArgumentParser]:
    from scripts.cli import build_parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
                return
        found[prefix] = parser

    walk(build_parser(), "")
    return found


def test_each_commands_help_agrees_with_the_docs() -> None:
    """The command-line table in docs/deployment.md says what ``--help`` says, word for word,
    and names every option."""
    text = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    section = text[text.index("## Command line") :]
    section = section[: section.find("\n## ", 3) % (len(section) + 1)]
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.+?) \|$", section, re.M))
    table = {usage.split(" ")[0] if not usage.startswith("keys") else " ".join(
        usage.split(" ")[:2]): (usage, meaning) for usage, meaning in rows.items()}  # fmt: skip
    commands = _commands()
    assert sorted(table) == sorted(commands)
    for name, parser in commands.items():
        usage, meaning = table[name]
        assert meaning.replace("\\|", "|") == parser.description, name
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help", "--db"):
                    assert option in usage, f"{name}: {option} is not in its row"
    assert "`--db URL`" in section


def readme_as_index(readme: str) -> str:
    """The site's front page is the README, with its links made relative to docs/."""
    return readme.replace("](docs/", "](")


def test_the_sites_front_page_is_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert index == readme_as_index(readme), "docs/index.md: copy the README (readme_as_index)"
