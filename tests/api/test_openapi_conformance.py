"""schemathesis drives every route with data drawn from /openapi.json itself.

No response may be a 5xx, carry a status or content type the document does
not list for that operation, or a body that violates its typed schema.
Path parameters are a real session, node and commit most of the time (a
random id only ever meets a 404), and the generation is derandomised with a
fixed number of examples per operation, so the run is bounded and repeatable.
"""

from __future__ import annotations

import time
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.testclient import TestClient

from api.app import create_app
from api.browser_safety import BrowserSafety
from tests.api.test_commands import World, ok

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]  # fmt: skip
EXAMPLES = {GenerationMode.POSITIVE: 12, GenerationMode.NEGATIVE: 4}


def test_no_response_violates_the_typed_document(runtime: Any) -> None:
    # schemathesis calls the app as Host "testserver": a host this app is told to serve.
    app = create_app(runtime, browser=BrowserSafety(allowed_hosts=("testserver",)))
    with TestClient(app) as client:
        world = World(client)
        commit = ok(client.get(f"/sessions/{world.sid}/context"))["id"]
    real = {"sid": [world.sid, world.other], "nid": ["u1", "a1", "t1", "a4", "a4b"],
            "cid": [commit]}  # fmt: skip
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    started = time.monotonic()
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode, examples in EXAMPLES.items():
            _drive(operation, mode, examples, real)
    assert operations >= 30
    print(f"schemathesis: {operations} operations in {time.monotonic() - started:.1f}s")


def _drive(operation: Any, mode: GenerationMode, examples: int,
           real: dict[str, list[str]], headers: dict[str, str] | None = None) -> None:  # fmt: skip
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(case=operation.as_strategy(generation_mode=mode), pick=st.integers(0, 99))
    def run(case: Any, pick: int) -> None:
        if case.path_parameters and pick < 80:  # mostly real ids, sometimes random ones
            case.path_parameters = {
                name: real[name][pick % len(real[name])] if name in real else value
                for name, value in case.path_parameters.items()
            }
        if operation.path.endswith("/stream"):
            case.query = {**(case.query or {}), "once": "true"}  # never an endless stream
        case.call_and_validate(checks=CHECKS, headers=headers)

    try:
        run()
    except Unsatisfiable:
        # nothing to make invalid: no parameters and no body (GET /health)
        assert mode is GenerationMode.NEGATIVE, operation.path


def test_with_a_key_no_response_violates_the_typed_document(runtime: Any) -> None:
    """The same run once keys exist: every request carries a valid write key of one
    tenant, and the path ids are its own session's or another tenant's (404)."""
    from service.api_keys import KeyStore

    secret = KeyStore(runtime.store.engine).create("acme", "write")[1]
    headers = {"Authorization": f"Bearer {secret}"}
    theirs, _ = runtime.execute("start_session", "globex's", tenant="globex")
    # schemathesis calls the app as Host "testserver": a host this app is told to serve.
    app = create_app(runtime, browser=BrowserSafety(allowed_hosts=("testserver",)))
    with TestClient(app, headers=headers) as client:
        world = World(client)
        commit = ok(client.get(f"/sessions/{world.sid}/context"))["id"]
        assert client.get(f"/sessions/{theirs}").status_code == 404
        before = world.version
    real = {"sid": [world.sid, world.other, str(theirs)], "nid": ["u1", "a1", "t1", "a4", "a4b"],
            "cid": [commit]}  # fmt: skip
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode, examples in EXAMPLES.items():
            _drive(operation, mode, examples, real, headers)
    assert runtime.app.session(world.sid).version > before, "the key's commands went through"
    assert runtime.app.session(theirs).version == 1, "and the other tenant's session is intact"
