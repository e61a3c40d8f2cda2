"""Commands as types (issue 15): one registry; the call spelling builds the same objects."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from domain import commands
from domain.application import CtxStore
from domain.errors import InvalidCommand


def test_every_command_has_one_handler_and_a_unique_name() -> None:
    assert len(commands.BY_NAME) == len(commands.HANDLERS)
    assert all(commands.BY_NAME[cls.name] is cls for cls in commands.HANDLERS)


def test_a_call_spelling_builds_the_typed_command() -> None:
    built = commands.from_call("append_node", "s1", role="tool", name="grep", at=None)
    assert built == commands.AppendNode(session_id="s1", node={"role": "tool", "name": "grep",
                                                                "at": None})  # fmt: skip
    assert commands.from_call("configure_compaction", "s1", "keep paths", None) == (
        commands.ConfigureCompaction(session_id="s1", instructions="keep paths")
    )
    # the usage object a client sends stays inside the report
    usage = commands.from_call("measure_usage", "s1", request_id="r", usage={"x": 1})
    assert usage == commands.MeasureUsage(session_id="s1", report={"request_id": "r",
                                                                   "usage": {"x": 1}})  # fmt: skip
    with pytest.raises(FrozenInstanceError):
        built.session_id = "s2"  # type: ignore[misc]


def test_unknown_commands_and_bad_arguments_are_refused() -> None:
    for name in ("session", "_command", "replay", "nope"):
        with pytest.raises(InvalidCommand):
            commands.from_call(name, "s1")
    with pytest.raises(TypeError):
        commands.from_call("pin", "s1", "n1", session_id="s1")
    with pytest.raises(TypeError):
        commands.from_call("pin", "s1", node_id="n1", colour="red")  # pin takes no extras


def test_handle_runs_a_command_on_the_application(app: CtxStore) -> None:
    sid, _ = commands.handle(app, commands.StartSession(title="typed"))
    node_id, version = commands.handle(
        app, commands.AppendNode.build(session_id=sid, role="user", input="hi", node_id="u1")
    )
    assert node_id == "u1"
    commands.handle(app, commands.Pin(session_id=sid, node_id="u1", expected_version=version))
    assert app.session(sid).pinned == ["u1"]
