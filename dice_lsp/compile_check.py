"""Compile diagnostics on open and save (and on change when enabled), debounced per document.

profiler.check runs nvcc (or a Python parse for KernelBench files) in a thread; a newer
edit cancels the pending check, and a result for an outdated version is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from lsprotocol import types

import profiler
from dice_lsp.diagnostics import DiagnosticsStore, compiler_diagnostics
from dice_lsp.targets import TargetError, language_of
from profiler.spec import spec_errors_as_diagnostics

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)


def document_diagnostics(source: str, path: str) -> list[profiler.Diagnostic]:
    """The compiler's messages for a document, and its `dice:` spec errors for CUDA."""
    found = list(profiler.check(source, path))
    if language_of(path) == "cuda":
        found += spec_errors_as_diagnostics(source)
    return found


class CompileChecker:
    def __init__(self, server: LanguageServer, diagnostics: DiagnosticsStore) -> None:
        self._server = server
        self._diagnostics = diagnostics
        self._pending: dict[str, asyncio.Task] = {}
        self._told_missing_compiler = False

    def schedule(self, uri: str, delay_ms: int) -> None:
        if (task := self._pending.pop(uri, None)) is not None:
            task.cancel()
        self._pending[uri] = asyncio.ensure_future(self._check(uri, delay_ms / 1000))

    def cancel(self, uri: str) -> None:
        if (task := self._pending.pop(uri, None)) is not None:
            task.cancel()

    async def _check(self, uri: str, delay_s: float) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(delay_s)
            document = self._server.workspace.get_text_document(uri)
            version, source, path = document.version, document.source, document.path
            try:
                language_of(path)
            except TargetError:
                return
            try:
                found = await asyncio.get_running_loop().run_in_executor(None, document_diagnostics, source, path)
            except profiler.CompilerMissing as exc:
                self._tell_missing_compiler(str(exc))
                return
            except Exception as exc:  # a checker bug must not stop the server; say so in the log
                log.exception("compile check of %s failed", uri)
                self._server.window_log_message(
                    types.LogMessageParams(type=types.MessageType.Error, message=f"dice: compile check failed: {exc}")
                )
                return
            current = self._server.workspace.text_documents.get(uri)
            if current is None or current.version != version:
                return  # closed or edited meanwhile: a newer check is on its way
            self._diagnostics.set_compile(uri, compiler_diagnostics(current, found))

    def _tell_missing_compiler(self, why: str) -> None:
        if self._told_missing_compiler:
            return
        self._told_missing_compiler = True
        self._server.window_show_message(
            types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=f"dice: compile diagnostics are off: {why}",
            )
        )
