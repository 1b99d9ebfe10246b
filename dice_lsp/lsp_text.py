"""Offsets in a text as LSP positions, in the encoding the client negotiated (UTF-16 by default)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import TextDocument

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer
    from pygls.workspace import Workspace


def document_key(uri: str) -> str:
    """The one form a document's URI is stored and looked up under, whatever the client's
    percent-encoding ("My%20Projects" and "My Projects" are one file); pygls' workspace
    keys its documents the same way."""
    return unquote(uri)


def open_document(workspace: Workspace, uri: str) -> TextDocument | None:
    """The editor's copy of the document, None when the editor has not opened it."""
    return workspace.text_documents.get(document_key(uri))


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
