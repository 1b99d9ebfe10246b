"""The one engine the server talks to: started on first use, replaced when `dice.model` or
`dice.device` changes, restarted after its worker process dies.

The engine lives in a worker process (engine.serving.client.AsyncEngine), so a model that fails to
load or a worker that crashes is an EngineError here and a message in the editor, never a
dead server.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from dice_lsp.core.config import Settings
from dice_lsp.core.status import StatusReporter
from profiler.machine import settings as environment

if TYPE_CHECKING:
    from engine.serving.client import AsyncEngine

log = logging.getLogger(__name__)

MODEL_CHOICES = (
    '"builtin" (the model shipped with dice-lsp), a checkpoint folder (config.json, *.safetensors '
    "and tokenizer files), a Hugging Face Hub id (ORG/NAME, downloaded once into the Hugging Face cache), "
    "dice://HOST:PORT (a `dice engine serve`) or sglang://HOST:PORT"
)
HOW_TO_SET_MODEL = f'Set the "dice.model" setting to {MODEL_CHOICES}.'


def worker_died(error: Exception) -> bool:
    """Whether an EngineError means the worker process (or the remote engine's connection)
    is gone, rather than a job it refused (a prompt too long for the context, say)."""
    from engine.types import EngineGone

    return isinstance(error, EngineGone)


class ModelUnavailable(Exception):
    """The configured model could not be started; the message says how to fix it."""


class EngineHost:
    def __init__(self, status: StatusReporter) -> None:
        self._status = status
        self._engine: AsyncEngine | None = None
        self._wanted: tuple[str, str | None] | None = None
        self._lock = asyncio.Lock()

    def has(self, settings: Settings) -> bool:
        """Whether the engine for these settings is started (a job then loads no model)."""
        return self._engine is not None and self._wanted == (settings.model, settings.device)

    async def get(self, settings: Settings) -> AsyncEngine:
        """The started engine for these settings, starting (or replacing) it if needed."""
        from engine.serving.client import AsyncEngine
        from engine.types import EngineError

        wanted = (settings.model, settings.device)
        async with self._lock:
            if self._engine is not None and self._wanted == wanted:
                return self._engine
            await self._close_locked()
            self._status.update(model=settings.model, busy=True, message=f"loading model {settings.model}")
            engine = AsyncEngine(settings.model, device=settings.device,
                                 memory=environment.current().engine_memory)
            try:
                info = await engine.start()
            except EngineError as exc:
                await engine.close()
                self._status.update(model=None, busy=False, message=f"no model: {exc}")
                raise ModelUnavailable(f"Could not load the model {settings.model!r}: {exc}. {HOW_TO_SET_MODEL}") from exc
            self._engine, self._wanted = engine, wanted
            path = f", decoding path {info.decode_path}" if info.decode_path else ""
            self._status.update(model=info.name, busy=False, message=f"ready: model loaded on {info.device}{path}")
            return engine

    async def recover(self, error: Exception) -> None:
        """After a job failed with an EngineError: restart the worker so the next job finds it."""
        async with self._lock:
            if self._engine is None:
                return
            self._status.update(busy=True, message=f"restarting the engine: {error}")
            try:
                await self._engine.restart()
            except Exception as exc:  # a worker that cannot come back: start afresh next time
                log.warning("engine restart failed: %s", exc)
                await self._close_locked()
                self._status.update(busy=False, model=None, message=f"engine stopped: {exc}")
                return
            self._status.update(busy=False, message="engine restarted after a crash")

    async def _close_locked(self) -> None:
        if self._engine is not None:
            engine, self._engine, self._wanted = self._engine, None, None
            try:
                await engine.close()
            except Exception as exc:  # closing a dead worker must not stop a new one from starting
                log.warning("closing the engine failed: %s", exc)

    async def close(self) -> None:
        async with self._lock:
            await self._close_locked()
