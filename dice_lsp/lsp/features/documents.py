"""The session's life and its documents: initialize, settings, open/change/save/close, shutdown.

Settings come from initializationOptions, then workspace/configuration once `initialized`
(jobs wait for them, see state.ready_settings); a document's compile check runs on open,
save and (when enabled) change.
"""

from __future__ import annotations

from lsprotocol import types
from pygls import uris

from dice_lsp.lsp.lsp_text import use_fast_positions
from dice_lsp.lsp.session import Session  # at run time: pygls evaluates handlers' annotations


def initialize(ls: Session, params: types.InitializeParams) -> None:
    use_fast_positions(ls.workspace)
    ls.apply_settings(params.initialization_options)


async def initialized(ls: Session, params: types.InitializedParams) -> None:
    ls.status.update(message="starting")
    roots = [uris.to_fs_path(folder.uri) for folder in ls.workspace.folders.values()] or [ls.workspace.root_path]
    for path in roots:
        if path:
            ls.watcher.watch(path)
    try:
        await ls.reload_settings()
    finally:
        ls.settings_loaded.set()
    await ls.detect_gpu()


async def did_change_configuration(ls: Session, params: types.DidChangeConfigurationParams) -> None:
    await ls.reload_settings(params.settings)


def did_open(ls: Session, params: types.DidOpenTextDocumentParams) -> None:
    ls.checker.schedule(params.text_document.uri, 0)


def did_change(ls: Session, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.diagnostics.document_changed(uri)
    if ls.settings.diagnostics_on_change:
        ls.checker.schedule(uri, ls.settings.debounce_ms)


def did_save(ls: Session, params: types.DidSaveTextDocumentParams) -> None:
    ls.checker.schedule(params.text_document.uri, ls.settings.debounce_ms)


def did_close(ls: Session, params: types.DidCloseTextDocumentParams) -> None:
    ls.checker.cancel(params.text_document.uri)
    ls.analyses.forget(params.text_document.uri)
    ls.diagnostics.forget(params.text_document.uri)


async def shutdown(ls: Session, params: None) -> None:
    await ls.release()
