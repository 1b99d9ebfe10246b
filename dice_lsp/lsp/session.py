"""What a feature gets: one editor connection's session, as an interface.

Features (lsp/features/) are handed a Session by the handlers lsp/wiring.py registers; they
never import the server's state (lsp/state.py), which implements this. What pygls'
LanguageServer gives (workspace, client capabilities, protocol, progress, applyEdit) is named
here too, so that a feature's needs are read in one place.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lsprotocol import types
    from pygls.progress import Progress
    from pygls.protocol import LanguageServerProtocol
    from pygls.workspace import Workspace

    from dice_lsp.core.cache import ResultCache
    from dice_lsp.core.config import Settings
    from dice_lsp.core.engine_host import EngineHost
    from dice_lsp.core.job_registry import JobRegistry
    from dice_lsp.core.status import StatusReporter
    from dice_lsp.lsp.compile_check import CompileChecker
    from dice_lsp.lsp.diagnostics import DiagnosticsStore
    from dice_lsp.lsp.document_analysis import Analyses, Analysis
    from dice_lsp.lsp.file_watch import FileWatcher


class Session(Protocol):
    # The server's own state
    settings: Settings
    status: StatusReporter
    engines: EngineHost
    jobs: JobRegistry
    cache: ResultCache
    diagnostics: DiagnosticsStore
    checker: CompileChecker
    watcher: FileWatcher
    analyses: Analyses
    gpu: str | None
    settings_loaded: asyncio.Event  # set once the client's settings are in

    async def ready_settings(self) -> Settings:
        """The settings, once the client's are in (or after a wait for them)."""

    async def reload_settings(self, pushed: Any = None) -> None: ...
    def apply_settings(self, raw: Any) -> None: ...
    async def analysis(self, uri: str) -> Analysis: ...
    def show(self, kind: types.MessageType, message: str) -> None: ...
    def refresh_lenses(self) -> None: ...
    async def detect_gpu(self) -> None: ...
    async def release(self) -> None: ...

    # pygls' LanguageServer
    workspace: Workspace
    client_capabilities: types.ClientCapabilities
    protocol: LanguageServerProtocol
    work_done_progress: Progress

    async def workspace_apply_edit_async(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult: ...
