"""`engine.load("dice://HOST:PORT")`: the synchronous Engine API over a remote engine server.

Each call opens a connection, runs one job through AsyncEngine (which polls should_cancel
and cancels the job on the server between steps) and closes.
"""

from __future__ import annotations

import asyncio
from engine.decoding.base import CancelFn, EngineBase, ProgressFn
from engine.serving.client import AsyncEngine, parse_dice_url
from engine.types import Candidate, EngineInfo, Request


class RemoteEngine(EngineBase):
    model = None  # the weights live on the server
    tokenizer = None

    def __init__(self, spec: str, token: str | None = None):
        parse_dice_url(spec)  # a bad address fails here, not on first use
        self.spec = spec
        self.token = token

    def info(self) -> EngineInfo:
        async def connect():
            client = AsyncEngine(self.spec, token=self.token)
            try:
                return await client.start()
            finally:
                await client.close()

        return asyncio.run(connect())

    def run(self, request: Request, on_progress: ProgressFn = None, should_cancel: CancelFn = None) -> list[Candidate]:
        async def job():
            client = AsyncEngine(self.spec, token=self.token)
            try:
                return await client.run(request, on_progress, should_cancel)
            finally:
                await client.close()

        return asyncio.run(job())
