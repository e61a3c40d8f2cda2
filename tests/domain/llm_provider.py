"""A real loopback HTTP server standing in for an LLM provider (not a mock).

A tiny Starlette app under uvicorn on 127.0.0.1 that speaks a sliver of the
OpenAI ``/v1/chat/completions`` protocol and of Anthropic's ``/v1/messages``,
records every request (body and headers) and answers as ``mode`` says.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route


class FakeProvider:
    """``mode``: ``ok``, ``error`` (HTTP 500), ``garbage`` (no text), ``empty``
    (blank text) or ``slow`` (a second late); ``answer`` replaces the default text."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.mode = "ok"
        self.answer: str | None = None
        routes = [Route("/v1/chat/completions", self.chat, methods=["POST"]),
                  Route("/v1/messages", self.messages, methods=["POST"])]  # fmt: skip
        app = Starlette(routes=routes)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The OpenAI-style base (``…/v1``); Anthropic's base is ``root``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        self.requests.clear()
        self.mode = "ok"
        self.answer = None

    async def _record(self, request: Request) -> tuple[dict[str, Any], Response | None]:
        body = await request.json()
        self.requests.append({"body": body, "auth": request.headers.get("authorization"),
                              "headers": dict(request.headers)})  # fmt: skip
        if self.mode == "error":
            return body, PlainTextResponse("upstream exploded", status_code=500)
        if self.mode == "slow":
            await asyncio.sleep(1)
        return body, None

    def _text(self, user: str) -> str:
        if self.mode == "empty":
            return "  \n"
        return self.answer if self.answer is not None else f"  SUMMARY({len(user)})\n"

    async def chat(self, request: Request) -> Response:
        body, failed = await self._record(request)
        if failed is not None:
            return failed
        if self.mode == "garbage":
            return JSONResponse({"choices": []})
        message = {"role": "assistant", "content": self._text(body["messages"][-1]["content"])}
        return JSONResponse({"choices": [{"message": message}]})

    async def messages(self, request: Request) -> Response:
        body, failed = await self._record(request)
        if failed is not None:
            return failed
        if self.mode == "garbage":
            return JSONResponse({"type": "error", "error": {"type": "overloaded_error"}})
        text = self._text(body["messages"][-1]["content"])
        half = len(text) // 2  # two text blocks, joined by the summarizer
        return JSONResponse({"id": "msg_1", "type": "message", "role": "assistant",
                             "content": [{"type": "text", "text": text[:half]},
                                         {"type": "text", "text": text[half:]}],
                             "stop_reason": "end_turn"})  # fmt: skip

    def __enter__(self) -> FakeProvider:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("loopback server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
