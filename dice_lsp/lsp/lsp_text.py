"""Offsets in a text as LSP positions, in the encoding the client negotiated (UTF-16 by default)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls import uris
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import TextDocument

from dice_lsp.core.uri import document_key
from profiler.source_files import SourceFileError, read_source_text

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer
    from pygls.workspace import Workspace


def open_document(workspace: Workspace, uri: str) -> TextDocument | None:
    """The editor's copy of the document, None when the editor has not opened it."""
    return workspace.text_documents.get(document_key(uri))


def _unopened_path(uri: str) -> str:
    path = uris.to_fs_path(uri) if uri.startswith("file:") else None
    if not path:
        raise SourceFileError(f"{uri} is not open in the editor and is not a file:// URI")
    return path


async def read_document(workspace: Workspace, uri: str) -> TextDocument:
    """The editor's copy of the document; else the file the URI names, read in a thread (never
    on the event loop), only when it is a regular file of at most MAX_SOURCE_BYTES. InvalidParams
    says why not (a FIFO, a device, a folder, too large, not UTF-8, missing)."""
    document = open_document(workspace, uri)
    if document is not None:
        return document
    try:
        text = await asyncio.get_running_loop().run_in_executor(None, read_source_text, _unopened_path(uri))
    except SourceFileError as exc:
        raise JsonRpcInvalidParams(f"{uri} is not open here and cannot be read: {exc}") from None
    return TextDocument(uri, source=text, version=None, position_codec=workspace.position_codec)


def current_text(workspace: Workspace, uri: str) -> tuple[int | None, str | None]:
    """The document's version and text now: the editor's copy, or the regular file the URI
    names (None for its text when it cannot be read). For a job's end, once: a bounded read
    that cannot wait on a FIFO."""
    document = open_document(workspace, uri)
    if document is not None:
        return document.version, document.source
    try:
        return None, read_source_text(_unopened_path(uri))
    except SourceFileError:
        return None, None


def text_document(server: LanguageServer, uri: str, text: str) -> TextDocument:
    """A detached document over `text` (a snapshot, a candidate) with the client's codec."""
    return TextDocument(uri, source=text, position_codec=server.workspace.position_codec)


def lsp_range(document: TextDocument, start: int, end: int) -> types.Range:
    return types.Range(document.client_position_at_offset(start), document.client_position_at_offset(end))


def line_range(document: TextDocument, line: int, column: int) -> types.Range:
    """The range a compiler message (1-based line/column) points at: from the column to the line end."""
    lines = document.lines
    row = min(max(line - 1, 0), max(len(lines) - 1, 0))
    text = lines[row] if lines else ""
    content = text.rstrip("\r\n")
    start = min(max(column - 1, 0), len(content))
    end = max(start, len(content))
    codec = document.position_codec
    return types.Range(
        codec.position_to_client_units(lines, types.Position(row, start)),
        codec.position_to_client_units(lines, types.Position(row, end)),
    )
