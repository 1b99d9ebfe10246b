"""Offsets in a text as LSP positions, in the encoding the client negotiated (UTF-16 by default)."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls import uris
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import PositionCodec, TextDocument
from pygls.workspace.position_codec import ServerTextPosition

from dice_lsp.core.uri import document_key
from profiler.source.source_files import SourceFileError, read_source_text

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer
    from pygls.workspace import Workspace


class FastPositionCodec(PositionCodec):
    """pygls' position codec, its answers unchanged, with its per-character Python loops done
    by the string codecs in C: on a 6 MB line one position took a second and a half, and
    every keystroke on that line converts two. An ASCII line (str.isascii is O(1)) needs no
    conversion at all."""

    def _units(self, text: str) -> int:
        if text.isascii() or self.encoding == types.PositionEncodingKind.Utf32:
            return len(text)
        if self.encoding == types.PositionEncodingKind.Utf8:
            return len(text.encode("utf-8", "surrogatepass"))
        return len(text.encode("utf-16-le", "surrogatepass")) // 2

    def client_num_units(self, string: str) -> int:
        return self._units(string)

    def _index(self, line: str, units: int) -> int:
        """The smallest index whose prefix of `line` has at least `units` code units (the
        length of the line when it has fewer), as pygls' loop counts."""
        if units <= 0:
            return 0
        if line.isascii() or self.encoding == types.PositionEncodingKind.Utf32:
            return min(units, len(line))
        if _SURROGATE.search(line):  # two lone halves would encode as one pair: count as pygls does
            return super().position_from_client_units((line,), types.Position(0, units)).character
        utf8 = self.encoding == types.PositionEncodingKind.Utf8
        encoding, width = ("utf-8", 1) if utf8 else ("utf-16-le", 2)
        head = line.encode(encoding, "surrogatepass")[: units * width]
        if utf8:
            head = head[: _whole_utf8(head)]
        # A character cut in two by the slice counts as reached, as in pygls' loop.
        index = len(head.decode(encoding, "surrogatepass"))
        if index < len(line) and self._units(line[:index]) < units:
            index += 1
        return index

    def position_from_client_units(self, lines, position: types.Position) -> ServerTextPosition:
        if len(lines) == 0:
            return ServerTextPosition(0, 0)
        if position.line >= len(lines):
            return ServerTextPosition(len(lines) - 1, self._units(lines[-1]))
        line = lines[position.line].replace("\r\n", "\n")
        total = self._units(line)
        if total == 0:
            return ServerTextPosition(position.line, 0)
        wanted = position.character if position.character <= total else total - 1
        return ServerTextPosition(position.line, self._index(line, wanted))

    def position_to_client_units(self, lines, position) -> types.Position:
        try:
            return types.Position(line=position.line, character=self._units(lines[position.line][: position.character]))
        except IndexError:
            return types.Position(line=len(lines), character=0)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _whole_utf8(data: bytes) -> int:
    """The length of `data` without a character cut short at its end."""
    start = len(data)
    while start > 0 and len(data) - start < 3 and data[start - 1] & 0xC0 == 0x80:
        start -= 1
    if start == 0:
        return len(data)
    lead = data[start - 1]
    need = 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC0 else 1
    return start - 1 if len(data) - (start - 1) < need else len(data)


class FastTextDocument(TextDocument):
    """pygls' TextDocument, with an incremental change applied by slicing the text at two
    offsets instead of writing every line of it again in a Python loop: a keystroke in a file
    of 2,000,000 lines took 1.2 s, now 0.6 (what is left is splitting the text into lines for
    the position codec). Ranges pygls' loop treats oddly (one that ends before it starts, or
    past the last line) go to pygls' own code."""

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        lines = self.lines
        span = self._position_codec.range_from_client_units(lines, change.range)
        start, end = (span.start.line, span.start.character), (span.end.line, span.end.character)
        if end < start or not start[0] < len(lines) or not end[0] < len(lines):
            super()._apply_incremental_change(change)
            return
        source = self.source
        start_line = sum(map(len, lines[: start[0]]))
        end_line = start_line + sum(map(len, lines[start[0] : end[0]]))
        begin = start_line + min(start[1], len(lines[start[0]]))
        finish = max(begin, end_line + min(end[1], len(lines[end[0]])))
        self._source = source[:begin] + change.text + source[finish:]


def use_fast_positions(workspace: Workspace) -> None:
    """Give the workspace (and the documents it opens from now on) FastPositionCodec, in the
    encoding it negotiated, and FastTextDocument. pygls makes both in `initialize` and has
    no setting for either."""
    workspace._position_codec = codec = FastPositionCodec(workspace.position_codec.encoding)

    def create(doc_uri: str, source: str | None = None, version: int | None = None,
               language_id: str | None = None) -> TextDocument:
        return FastTextDocument(doc_uri, source=source, version=version, language_id=language_id,
                                sync_kind=workspace._sync_kind, position_codec=codec)

    workspace._create_text_document = create


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
