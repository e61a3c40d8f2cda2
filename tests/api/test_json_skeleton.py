"""The skeleton a large body's structure is checked on sees every duplicate key and
every level of nesting the body has, whatever its strings hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from api.json_skeleton import skeleton

TRICKY = st.text(alphabet=st.sampled_from(['"', "\\", "a", ":", "{", "[", "\n", "é", "\x01"]))
LEAF = st.one_of(st.none(), st.booleans(), st.integers(), TRICKY, st.text(max_size=40))
KEY = st.one_of(st.sampled_from(["k", "role", '"', "\\", "a:b"]), TRICKY)


def _doc(draw: Any, depth: int) -> str:
    """JSON text of a random value; objects may repeat a key, spacing varies."""
    kind = draw(st.integers(0, 2)) if depth < 6 else 0
    space = draw(st.sampled_from(["", " ", "\n\t "]))
    ascii_only = draw(st.booleans())
    if kind == 0:
        return json.dumps(draw(LEAF), ensure_ascii=ascii_only)
    if kind == 1:
        items = [_doc(draw, depth + 1) for _ in range(draw(st.integers(0, 3)))]
        return "[" + f",{space}".join(items) + "]"
    keys = draw(st.lists(KEY, max_size=4))
    pairs = [f"{json.dumps(k, ensure_ascii=ascii_only)}{space}:{space}{_doc(draw, depth + 1)}"
             for k in keys]  # fmt: skip
    return "{" + f",{space}".join(pairs) + "}"


@st.composite
def documents(draw: Any) -> bytes:
    return _doc(draw, 0).encode()


def _shape(raw: bytes) -> Any:
    """What the structure check sees: the duplicate verdict and the value with its
    string values blanked (keys kept), or that the stdlib parser refuses it."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise KeyError("duplicate")
        return dict(pairs)

    def blank(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: blank(v) for k, v in value.items()}
        if isinstance(value, list):
            return [blank(v) for v in value]
        return "" if isinstance(value, str) else value

    try:
        return blank(json.loads(raw, object_pairs_hook=hook))
    except KeyError:
        return "duplicate"
    except ValueError:
        return "not json"


@settings(max_examples=400)
@given(documents(), st.integers(0, 12))
def test_the_skeleton_has_the_bodys_keys_and_nesting(raw: bytes, long: int) -> None:
    shape = skeleton(raw, long)
    assert shape is not None
    assert _shape(shape) == _shape(raw)


def test_long_values_are_blanked_and_keys_are_not() -> None:
    text = "x" * 5000 + '\\" still inside \\\\'
    key = "k" * 5000
    raw = json.dumps({"output": text, key: 1, "list": [text, {"a": text}]}).encode()
    assert json.loads(skeleton(raw) or b"") == {"output": "", key: 1, "list": ["", {"a": ""}]}


@pytest.mark.parametrize(
    "raw", [b'{"output": "never closed', b'\xef\xbb\xbf{"a": 1}', '{"a": 1}'.encode("utf-16")]
)
def test_what_it_cannot_read_is_left_to_the_parser(raw: bytes) -> None:
    assert skeleton(raw) is None


def test_a_large_body_is_still_refused_for_a_duplicate_key_or_depth(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["session_id"]
    big = json.dumps("x" * 200_000)
    headers = {"Content-Type": "application/json"}
    twice = f'{{"role": "user", "output": {big}, "metadata": {{"k": 1, "k": 2}}}}'
    answer = client.post(f"/sessions/{sid}/nodes", content=twice.encode(), headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "duplicate_key"
    deep = f'{{"role": "user", "output": {big}, "metadata": {{"k": {"[" * 200}{"]" * 200}}}}}'
    answer = client.post(f"/sessions/{sid}/nodes", content=deep.encode(), headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "json_too_deep"
    broken = f'{{"role": "user", "output": {big[:-1]}\\x"}}'
    answer = client.post(f"/sessions/{sid}/nodes", content=broken.encode(), headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "malformed_json"
    fine = f'{{"role": "user", "output": {big}}}'
    stored = client.post(f"/sessions/{sid}/nodes", content=fine.encode(), headers=headers)
    assert stored.status_code == 201
    assert len(client.get(f"/sessions/{sid}/nodes").json()["nodes"]) == 1


def test_a_large_body_is_checked_through_its_skeleton(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api import body_parsing

    sizes: list[int] = []
    loads = json.loads

    def measured(raw: Any, **kwargs: Any) -> Any:
        sizes.append(len(raw))
        return loads(raw, **kwargs)

    monkeypatch.setattr(body_parsing.json, "loads", measured)
    sid = client.post("/sessions", json={}).json()["session_id"]
    body = json.dumps({"role": "user", "output": "x" * 500_000}).encode()
    answer = client.post(f"/sessions/{sid}/nodes", content=body,
                         headers={"Content-Type": "application/json"})  # fmt: skip
    assert answer.status_code == 201
    assert sizes and max(sizes) < 1000


def test_a_body_of_many_quotes_is_left_to_the_stdlib() -> None:
    assert skeleton(json.dumps(["a"] * 100_000).encode()) is None
    escaped = json.dumps({"output": '\\"' * 100_000}).encode()
    assert skeleton(escaped) is None
    run = b'{"o": "' + b"\\\\" * 100_000 + b'"}'  # one long run of escaped backslashes
    assert skeleton(run) == b'{"o": ""}'
