"""One editor connection's server: its state (settings, engine, jobs, cache, diagnostics,
compile checks, document analyses, GPU) and the small operations on it that features share.

It registers nothing: lsp/wiring.py builds a DiceServer and hooks the features' handlers on
it; features see it as a Session (lsp/session.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer

from dice_lsp.core.cache import ResultCache
from dice_lsp.core.config import Settings, parse_settings
from dice_lsp.core.engine_host import EngineHost
from dice_lsp.core.job_registry import JobRegistry
from dice_lsp.core.measured import live_keys
from dice_lsp.core.status import StatusReporter
from dice_lsp.lsp.compile_check import CompileChecker
from dice_lsp.lsp.diagnostics import DiagnosticsStore
from dice_lsp.lsp.document_analysis import Analyses, Analysis
from dice_lsp.lsp.file_watch import FileWatcher
from dice_lsp.lsp.lsp_text import open_document, read_document
from dice_lsp.lsp.protocol import DiceProtocol
from profiler.sandbox import POOL as SANDBOX_POOL
from profiler.source.source_files import SourceFileError, read_source_text

log = logging.getLogger("dice_lsp")

VERSION = "0.1.0"
# A client that never sends `initialized` still gets its jobs run, with what it sent so far.
SETTINGS_WAIT_S = 10.0


class DiceServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("dice-lsp", VERSION, protocol_cls=DiceProtocol)
        self.settings = Settings()
        self.status = StatusReporter(self.protocol.notify)
        self.engines = EngineHost(self.status)
        self.jobs = JobRegistry()
        self.protocol.on_cancel_request = self.jobs.cancel_request
        self.cache = ResultCache()
        self.diagnostics = DiagnosticsStore(self)
        self.checker = CompileChecker(self, self.diagnostics)
        self.watcher = FileWatcher(self.on_disk_change)
        self.analyses = Analyses(on_late=self.refresh_lenses)
        self.gpu: str | None = None
        # Set once the client's settings are in (workspace/configuration after `initialized`):
        # a job sent right after `initialized` must not run with the defaults.
        self.settings_loaded = asyncio.Event()

    async def ready_settings(self) -> Settings:
        try:
            await asyncio.wait_for(self.settings_loaded.wait(), SETTINGS_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("no settings from the client after %.0f s; using what it sent", SETTINGS_WAIT_S)
        return self.settings

    async def release(self) -> None:
        """Stop everything this server started: its client is gone or shutting down."""
        self.jobs.cancel()
        self.checker.cancel_all()
        self.watcher.stop()
        SANDBOX_POOL.drain()  # pre-started sandboxes hold CUDA contexts; at exit they go anyway
        await self.engines.close()

    async def analysis(self, uri: str) -> Analysis:
        """The analysis of the document's current version (computed off the event loop)."""
        return await self.analyses.of(await read_document(self.workspace, uri))

    def show(self, kind: types.MessageType, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def apply_settings(self, raw: Any) -> None:
        self.settings, problems = parse_settings(raw)
        for problem in problems:
            self.show(types.MessageType.Warning, f"dice-lsp settings: {problem}")

    async def reload_settings(self, pushed: Any = None) -> None:
        """Settings from workspace/configuration when the client has it, else what it pushed."""
        workspace = self.client_capabilities.workspace
        if workspace and workspace.configuration:
            try:
                items = await self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="dice")])
                )
                pushed = items[0] if items else None
            except Exception as exc:  # a client that fails the request keeps the pushed settings
                log.warning("workspace/configuration failed: %s", exc)
        if pushed is not None:
            self.apply_settings(pushed)

    def refresh_lenses(self) -> None:
        workspace = self.client_capabilities.workspace
        if workspace and workspace.code_lens and workspace.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    async def detect_gpu(self) -> None:
        import profiler

        try:
            self.gpu = await asyncio.get_running_loop().run_in_executor(None, profiler.gpu_name)
        except Exception as exc:  # no GPU query at all still leaves compile checks working
            log.warning("GPU detection failed: %s", exc)
            self.gpu = None
        try:
            from profiler.sandbox.isolation import describe

            _, sandbox = await asyncio.get_running_loop().run_in_executor(None, describe)
        except Exception as exc:  # noqa: BLE001 - the status says so; judging reports its own refusal
            sandbox = f"unknown: {exc}"
        self.status.update(gpu=self.gpu, sandbox=sandbox,
                           message="ready" if self.gpu else "ready (no GPU: results are not timed)")
        self.refresh_lenses()

    def on_disk_change(self, path: str) -> None:
        """A watched file changed outside the editor: drop the results that no longer match it."""
        uri = uris.from_fs_path(path) or path
        if open_document(self.workspace, uri) is not None:
            return  # the editor owns the text; its didChange keeps results in step
        asyncio.ensure_future(self._disk_changed(uri, path))

    async def _disk_changed(self, uri: str, path: str) -> None:
        # Read and parsed in a thread: the file may be large, or no longer a regular file.
        keys = await asyncio.get_running_loop().run_in_executor(None, _live_keys_on_disk, path, self.gpu)
        dropped = self.cache.prune(path, keys)
        self.jobs.forget(uri)
        self.diagnostics.clear_verdicts(uri)
        if dropped:
            log.info("dropped %d stale result(s) of %s", dropped, path)
            self.refresh_lenses()


def _live_keys_on_disk(path: str, gpu: str | None) -> set[str]:
    try:
        text = read_source_text(path)
    except SourceFileError:
        text = ""
    return live_keys(text, path, gpu)
