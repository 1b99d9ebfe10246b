"""Where a job's candidates may go in the document as it is now, and the edits that put them there.

A candidate replaces the job's span and nothing else. The document may have moved on since
the snapshot; a candidate is still safe to apply only if the text before and after the span
is unchanged and the span holds what the job left there (the original text or one of the
candidates), so that no edit of the user's is lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from dice_lsp.core.jobs import JobResult
from dice_lsp.lsp.lsp_text import lsp_range, text_document

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer


def candidate_slot(result: JobResult, text: str) -> tuple[int, int] | None:
    """The span of `text` that a candidate of `result` would replace, or None if unsafe."""
    before = result.snapshot.text[: result.target.start]
    after = result.snapshot.text[result.target.end :]
    if not (text.startswith(before) and text.endswith(after) and len(text) >= len(before) + len(after)):
        return None
    start, end = len(before), len(text) - len(after)
    held = text[start:end]
    known = {result.snapshot.text[result.target.start : result.target.end]}
    known.update(result.replacement(i) for i in range(len(result.candidates)))
    return (start, end) if held in known else None


def replace_edit(server: LanguageServer, uri: str, version: int | None, text: str, start: int, end: int, new: str) -> types.WorkspaceEdit:
    """One TextEdit over [start, end) of `text`, versioned where the client checks versions."""
    edit = types.TextEdit(range=lsp_range(text_document(server, uri, text), start, end), new_text=new)
    workspace = server.client_capabilities.workspace
    versioned = bool(workspace and workspace.workspace_edit and workspace.workspace_edit.document_changes)
    if versioned:
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                    edits=[edit],
                )
            ]
        )
    return types.WorkspaceEdit(changes={uri: [edit]})


def candidate_edit(
    server: LanguageServer, result: JobResult, index: int, text: str, version: int | None
) -> types.WorkspaceEdit | None:
    """The edit that puts candidate `index` in the document (text, version), or None if unsafe."""
    slot = candidate_slot(result, text)
    if slot is None:
        return None
    return replace_edit(server, result.snapshot.uri, version, text, *slot, result.replacement(index))
