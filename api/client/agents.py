"""An OpenAI Agents SDK ``Session`` backed by ctxstore (``get_items``, ``add_items``,
``pop_item``, ``clear_session``).

    from agents import Agent, Runner
    from api.client import AsyncClient
    from api.client.agents import CtxStoreSession

    ctx = AsyncClient("http://127.0.0.1:8000", api_key=KEY)
    session = await CtxStoreSession.create(ctx, title="support chat", model="openai:gpt-4o")
    await Runner.run(agent, "Hello", session=session)   # session.session_id: ctxstore's id

or, without a client of your own, ``await CtxStoreSession.open(url, api_key=KEY)``
(a new session) or ``CtxStoreSession.open(url, session_id, api_key=KEY)``.

How items become nodes (so ctxstore's rules see a conversation, not blobs):

* every SDK item is kept verbatim, in order, in the ``agents_items`` list of
  the metadata of the node that carries it: ``get_items`` is those lists,
  concatenated along the branch, so items round-trip exactly;
* a user / system / developer message is a ``user`` / ``system`` node; an
  assistant message an ``assistant`` node (its text as output);
* a ``function_call`` is a ``tool`` node hanging off the assistant turn that
  made it (an empty assistant node is added when the model answered with
  calls only), with the call id, the name and the parsed arguments; its
  ``function_call_output`` is a newer version of the same call (same
  caller and call id, now with the output), which is what the context
  shows from then on;
* reasoning and other model-side items before a turn's message ride on that
  turn's assistant node; any other item gets a node of its own.

Each ``add_items`` is one batch (one atomic write, guarded by the version
the adapter read), so a concurrent writer makes it re-read and retry, never
interleave.  ctxstore is append-only, so removing is moving the head:

* ``pop_item`` checks out the node before the last item's node (the branch
  then ends there; the popped node stays in the log, reachable by checkout),
  or, when that node carries more items, records an edit of it carrying the
  rest;
* ``clear_session`` starts a new, empty branch: an edit of the first node
  with no content and no items, as a second root.  The old history stays in
  the log and in ``/dag``; nothing is deleted.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from api import session_responses as sr
from api.client.aio import AsyncClient
from api.client.errors import Conflict

KEY = "agents_items"
ATTEMPTS = 5  # re-read and retry when another writer moved the session first
MODEL_SIDE = frozenset({"reasoning", "web_search_call", "file_search_call", "computer_call",
                        "code_interpreter_call", "image_generation_call", "local_shell_call",
                        "mcp_call", "mcp_list_tools", "mcp_approval_request",
                        "shell_call", "apply_patch_call", "custom_tool_call"})  # fmt: skip
Item = dict[str, Any]


class CtxStoreSession:
    """The Agents SDK ``Session`` protocol over one ctxstore session."""

    session_settings: Any = None  # the SDK's SessionSettings; None keeps its defaults

    def __init__(self, session_id: str, client: AsyncClient) -> None:
        self.session_id = session_id
        self.client = client

    @classmethod
    async def create(cls, client: AsyncClient, title: str = "", model: str = "openai:gpt-4o",
                     context_window: int | None = None) -> CtxStoreSession:  # fmt: skip
        started = await client.start_session(title, model, context_window=context_window)
        return cls(started.session_id, client)

    @classmethod
    async def open(cls, base_url: str, session_id: str | None = None, *,
                   api_key: str | None = None, title: str = "", model: str = "openai:gpt-4o",
                   context_window: int | None = None) -> CtxStoreSession:  # fmt: skip
        """A session over a client of its own (``api_key`` sent as ``Authorization: Bearer``):
        ``session_id``'s, or a new one.  ``await session.client.aclose()`` when done."""
        client = AsyncClient(base_url, api_key=api_key)
        try:
            if session_id is None:
                return await cls.create(client, title, model, context_window)
            await client.get_session(session_id)  # unknown (or another tenant's): NotFound now
            return cls(session_id, client)
        except BaseException:
            await client.aclose()
            raise

    # ------------------------------------------------------------ protocol

    async def get_items(self, limit: int | None = None) -> list[Item]:
        items = _items((await self.client.nodes(self.session_id)).nodes)
        if limit is not None:
            return items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: Sequence[Any]) -> None:
        new = [_plain(item) for item in items]
        if not new:
            return
        for attempt in range(ATTEMPTS):
            branch = await self.client.nodes(self.session_id)
            entries = Planner(branch.nodes).plan(new)
            try:
                await self.client.append_nodes(self.session_id, entries,
                                               expected_version=branch.version)  # fmt: skip
                return
            except Conflict as exc:
                if exc.code != "stale_version" or attempt + 1 == ATTEMPTS:
                    raise

    async def pop_item(self) -> Item | None:
        for attempt in range(ATTEMPTS):
            branch = await self.client.nodes(self.session_id)
            carriers = [n for n in branch.nodes if n.metadata.get(KEY)]
            if not carriers:
                return None
            last = carriers[-1]
            carried: list[Item] = list(last.metadata[KEY])
            popped, rest = carried[-1], carried[:-1]
            try:
                if rest:
                    await self.client.edit(self.session_id, last.node_id,
                                           output=_assistant_text(rest),
                                           metadata={**last.metadata, KEY: rest},
                                           expected_version=branch.version)  # fmt: skip
                else:
                    await self._end_before(branch, last)
                return popped
            except Conflict as exc:
                if exc.code != "stale_version" or attempt + 1 == ATTEMPTS:
                    raise
        return None  # pragma: no cover (the loop returns or raises)

    async def clear_session(self) -> None:
        branch = await self.client.nodes(self.session_id)
        if not _items(branch.nodes):
            return
        await self._empty_branch(branch)

    # ------------------------------------------------------------- helpers

    async def _end_before(self, branch: sr.BranchNodes, last: sr.Node) -> None:
        """Move the head so the branch ends just before ``last``."""
        index = next(i for i, n in enumerate(branch.nodes) if n.node_id == last.node_id)
        if index == 0:  # nothing before it: an empty branch
            await self._empty_branch(branch)
            return
        await self.client.checkout(self.session_id, branch.nodes[index - 1].node_id,
                                   expected_version=branch.version)  # fmt: skip

    async def _empty_branch(self, branch: sr.BranchNodes) -> None:
        root = branch.nodes[0]
        cleared = {KEY: [], "agents_cleared": True}
        await self.client.edit(self.session_id, root.node_id, metadata=cleared,
                               expected_version=branch.version)  # fmt: skip


class Planner:
    """Turns new SDK items into batch entries, continuing the branch as it stands."""

    def __init__(self, nodes: Sequence[sr.Node]) -> None:
        self.entries: list[dict[str, Any]] = []
        self.calls: dict[str, dict[str, Any]] = {}  # SDK call id -> its tool node's fields
        self.turn: str | None = None  # the assistant node of the model response under way
        self.pending: list[Item] = []  # model-side items waiting for their turn's node
        for node in nodes:
            for item in node.metadata.get(KEY) or []:
                self._remember(node.node_id, node.role, node.parent, node.name, node.input,
                               node.call_id, item)  # fmt: skip

    def _remember(self, node_id: str, role: str, parent: str | None, name: str | None,
                  input: Any, call_id: str | None, item: Item) -> None:  # fmt: skip
        kind = _kind(item)
        if kind == "function_call" and parent is not None:
            self.calls[str(item.get("call_id"))] = {"caller": parent, "call_id": call_id,
                                                   "name": name, "input": input}  # fmt: skip
        if kind in ("assistant", "function_call", "model"):
            self.turn = node_id if role == "assistant" else parent
        else:
            self.turn = None

    def plan(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        for item in items:
            self._one(item)
        self._flush()
        return self.entries

    def _add(self, carried: list[Item], **fields: Any) -> str:
        node_id = f"ag-{uuid.uuid4().hex}"
        self.entries.append({"node_id": node_id, "metadata": {KEY: carried}, **fields})
        return node_id

    def _flush(self) -> None:
        """Model-side items with no message after them: a turn of their own."""
        if self.pending:
            self.turn = self._add(self.pending, role="assistant")
            self.pending = []

    def _one(self, item: Item) -> None:
        kind = _kind(item)
        if kind == "model":
            if self.turn is None:
                self.pending.append(item)
            else:  # after this response's message or calls: a node of its own
                self.turn = self._add([item], role="assistant")
            return
        if kind == "assistant":
            carried, self.pending = [*self.pending, item], []
            self.turn = self._add(carried, role="assistant", output=_assistant_text(carried))
            return
        if kind == "function_call":
            if self.turn is None:
                carried, self.pending = self.pending, []
                self.turn = self._add(carried, role="assistant")
            fields = {"caller": self.turn, "call_id": _call_id(item.get("call_id")),
                      "name": str(item.get("name") or "tool")[:128],
                      "input": _arguments(item.get("arguments"))}  # fmt: skip
            self._add([item], role="tool", **fields)
            self.calls[str(item.get("call_id"))] = fields
            return
        self._flush()
        self.turn = None
        if kind == "function_call_output":
            call = self.calls.get(str(item.get("call_id")))
            if call is not None:
                self._add([item], role="tool", output=item.get("output"), **call)
                return
            self._add([item], role="user", input=item.get("output"))  # its call is not here
            return
        if kind in ("user", "system"):
            self._add([item], role=kind, input=item.get("content"))
            return
        self._add([item], role="user")  # an input item ctxstore has no role for


def _plain(item: Any) -> Item:
    if isinstance(item, Mapping):
        copied: Item = json.loads(json.dumps(dict(item)))  # a plain, detached copy
        return copied
    dump = getattr(item, "model_dump", None)
    if dump is not None:
        plain: Item = dump(mode="json", exclude_unset=True)
        return plain
    raise TypeError(f"not an Agents SDK item: {type(item).__name__}")


def _kind(item: Mapping[str, Any]) -> str:
    """user | system | assistant | function_call | function_call_output | model | other."""
    kind = item.get("type")
    if kind in (None, "message") and "role" in item:
        role = item["role"]
        return "system" if role in ("system", "developer") else str(role)
    if kind in ("function_call", "function_call_output"):
        return str(kind)
    return "model" if kind in MODEL_SIDE else "other"


def _assistant_text(items: Sequence[Mapping[str, Any]]) -> str | None:
    texts: list[str] = []
    for item in items:
        if _kind(item) != "assistant":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(p.get("text") or p.get("refusal") or "") for p in content
                      if isinstance(p, Mapping)]  # fmt: skip
    return "".join(texts) if texts else None


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _call_id(raw: Any) -> str:
    """The SDK's call id when ctxstore can keep it (1-64 characters, no control characters)."""
    text = str(raw or "")
    if 0 < len(text) <= 64 and not any(c in text for c in "\x00\r\n\t"):
        return text
    return "c-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _items(nodes: Sequence[sr.Node]) -> list[Item]:
    return [item for node in nodes for item in node.metadata.get(KEY) or []]
