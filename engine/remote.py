"""`engine.load("dice://HOST:PORT")`: the synchronous Engine API over a remote engine server.

Each call opens a connection, runs one job through AsyncEngine (which polls should_cancel
and cancels the job on the server between steps) and closes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from engine.client import AsyncEngine, parse_dice_url
from engine.types import Candidate, EngineInfo


class RemoteEngine:
    model = None  # the weights live on the server
    tokenizer = None

    def __init__(self, spec: str):
        parse_dice_url(spec)  # a bad address fails here, not on first use
        self.spec = spec

    def _run(self, method: str, kwargs: dict[str, Any]):
        async def job():
            client = AsyncEngine(self.spec)
            try:
                if method == "info":
                    return await client.start()
                return await getattr(client, method)(**kwargs)
            finally:
                await client.close()

        return asyncio.run(job())

    def info(self) -> EngineInfo:
        return self._run("info", {})

    def infill(self, prefix: str, suffix: str, n: int = 1, max_tokens: int = 256, **options) -> list[Candidate]:
        """Engine.infill's arguments (reference, on_progress, should_cancel, sampling)."""
        return self._run("infill", dict(prefix=prefix, suffix=suffix, n=n, max_tokens=max_tokens, **options))

    def generate(self, prompt: str, n: int = 1, max_tokens: int = 512, **options) -> list[Candidate]:
        return self._run("generate", dict(prompt=prompt, n=n, max_tokens=max_tokens, **options))

    def optimize(self, code: str, *, language: str = "cuda", n: int = 1, max_tokens: int = 1024,
                 **options) -> list[Candidate]:
        return self._run("optimize", dict(code=code, language=language, n=n, max_tokens=max_tokens, **options))
