"""`engine.load("dice://HOST:PORT")`: the synchronous Engine API over a remote engine server.

Each call opens a connection, runs one job through AsyncEngine and closes; should_cancel is
polled while the job runs and cancels it on the server between steps.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from engine.client import AsyncEngine, parse_dice_url
from engine.types import Cancelled, Candidate, EngineInfo

CANCEL_POLL_S = 0.05


class RemoteEngine:
    model = None  # the weights live on the server
    tokenizer = None

    def __init__(self, spec: str):
        parse_dice_url(spec)  # a bad address fails here, not on first use
        self.spec = spec

    def _run(self, method: str, should_cancel: Callable[[], bool] | None, kwargs: dict[str, Any]):
        async def job():
            client = AsyncEngine(self.spec)
            try:
                if method == "info":
                    return await client.start()
                task = asyncio.create_task(getattr(client, method)(**kwargs))
                while not task.done():
                    await asyncio.wait([task], timeout=CANCEL_POLL_S)
                    if not task.done() and should_cancel is not None and should_cancel():
                        task.cancel()
                        try:
                            await task
                        except asyncio.CancelledError:
                            raise Cancelled("cancelled") from None
                return task.result()
            finally:
                await client.close()

        return asyncio.run(job())

    def info(self) -> EngineInfo:
        return self._run("info", None, {})

    def infill(self, prefix: str, suffix: str, n: int = 1, max_tokens: int = 256, *, reference: str | None = None,
               on_progress=None, should_cancel=None, **sampling) -> list[Candidate]:
        kwargs = dict(prefix=prefix, suffix=suffix, n=n, max_tokens=max_tokens, reference=reference,
                      on_progress=on_progress, **sampling)
        return self._run("infill", should_cancel, kwargs)

    def generate(self, prompt: str, n: int = 1, max_tokens: int = 512, *, on_progress=None, should_cancel=None,
                 **sampling) -> list[Candidate]:
        kwargs = dict(prompt=prompt, n=n, max_tokens=max_tokens, on_progress=on_progress, **sampling)
        return self._run("generate", should_cancel, kwargs)

    def optimize(self, code: str, *, language: str = "cuda", n: int = 1, max_tokens: int = 1024, on_progress=None,
                 should_cancel=None, **sampling) -> list[Candidate]:
        kwargs = dict(code=code, language=language, n=n, max_tokens=max_tokens, on_progress=on_progress, **sampling)
        return self._run("optimize", should_cancel, kwargs)
