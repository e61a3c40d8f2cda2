"""An OpenAI Agents SDK ``Session`` backed by ctxstore (``get_items``, ``add_items``,
``pop_item``, ``clear_session``).

    from agents import Agent, Runner
    from ctxstore_client import AsyncClient
    from ctxstore_client.agents import CtxStoreSession

    ctx = AsyncClient("http://127.0.0.1:8000", api_key=KEY)
    session = await CtxStoreSession.create(ctx, title="support chat", model="openai:gpt-4o")
    await Runner.run(agent, "Hello", session=session)   # session.session_id: ctxstore's id

or, without a client of your own, ``await CtxStoreSession.open(url, api_key=KEY)``
(a new session) or ``CtxStoreSession.open(url, session_id, api_key=KEY)``.

How items become nodes (so ctxstore's rules see a conversation, not blobs):

* every SDK item is kept verbatim, in order, in the ``agents_items`` list of
  the metadata of the node that carries it: ``get_all_items`` is those lists,
  concatenated along the branch, so items round-trip exactly; ``get_items``,
  what the SDK feeds the model, is ctxstore's managed context instead (the
  head's render, inside the window, as Responses items);
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

``session.recall_tool()`` is a ``FunctionTool`` named ``recall`` bound to the
session (for a deployment whose policy has ``recall_tool`` on): the model
reads back folded content through it (``ctxstore_client.recall_tool``), and
its call and output are items like any other, so they are stored as a tool node.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ctxstore_client import session_responses as sr
from ctxstore_client.agents_items import last_items, responses_items
from ctxstore_client.agents_planner import KEY, Item, Planner, _assistant_text, _items, _plain
from ctxstore_client.aio import AsyncClient
from ctxstore_client.errors import Conflict, NotFound
from ctxstore_client.recall_tool import RECALL_SPEC, run_recall_async

ATTEMPTS = 5  # re-read and retry when another writer moved the session first


class CtxStoreSession:
    """The Agents SDK ``Session`` protocol over one ctxstore session."""

    session_settings: Any = None  # the SDK's SessionSettings; None keeps its defaults

    def __init__(self, session_id: str, client: AsyncClient) -> None:
        self.session_id = session_id
        self.client = client
        # the planner as the branch stood after this adapter's last write, and the
        # session's version then: the next write needs no read while nobody else wrote
        self._planned: tuple[int, Planner] | None = None

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
        """What the model is fed: ctxstore's render of the head (inside the window) as
        Responses API input items (``ctxstore_client.agents_items``); ``get_all_items`` is
        everything stored."""
        try:
            rendered = await self.client.render(self.session_id, shape="openai")
        except NotFound as exc:
            if exc.code == "session_not_found":
                raise
            return []  # no commit yet: nothing appended
        return last_items(responses_items(rendered.request), limit)

    async def get_all_items(self, limit: int | None = None) -> list[Item]:
        """Every item the SDK added along the branch, verbatim and in order."""
        items = _items((await self.client.nodes(self.session_id)).nodes)
        if limit is not None:
            return items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: Sequence[Any]) -> None:
        new = [_plain(item) for item in items]
        if not new:
            return
        for attempt in range(ATTEMPTS):
            if self._planned is not None:  # guarded by the version: a stale one is refused
                version, planner = self._planned[0], copy.deepcopy(self._planned[1])
            else:
                branch = await self.client.nodes(self.session_id)
                version, planner = branch.version, Planner(branch.nodes)
            self._planned = None
            entries = planner.plan(new)
            try:
                done = await self.client.append_nodes(self.session_id, entries,
                                                      expected_version=version)  # fmt: skip
            except Conflict as exc:
                if exc.code != "stale_version" or attempt + 1 == ATTEMPTS:
                    raise
                continue
            planner.entries = []
            self._planned = (done.version, planner)
            return

    async def pop_item(self) -> Item | None:
        self._planned = None
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
        self._planned = None
        branch = await self.client.nodes(self.session_id)
        if not _items(branch.nodes):
            return
        await self._empty_branch(branch)

    def recall_tool(self) -> Any:
        """An Agents SDK ``FunctionTool`` named ``recall`` searching this session's folded
        content; bad arguments are answered as text, for the model to fix its call."""
        from agents import FunctionTool

        async def invoke(_context: Any, arguments: str) -> str:
            return await run_recall_async(self.client, self.session_id, arguments)

        return FunctionTool(name=RECALL_SPEC["name"], description=RECALL_SPEC["description"],
                            params_json_schema=copy.deepcopy(RECALL_SPEC["input_schema"]),
                            on_invoke_tool=invoke, strict_json_schema=False)  # fmt: skip

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
