"""The edits that put a candidate (or a spec) in the document, as LSP WorkspaceEdits, and
asking the editor to apply one. Where a candidate may go is core/slots.py's to say."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from dice_lsp.core.jobs import JobResult
from dice_lsp.core.slots import candidate_slot
from dice_lsp.lsp.lsp_text import lsp_range, text_document

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from dice_lsp.lsp.session import Session


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


async def apply_edit(ls: Session, edit: types.WorkspaceEdit, label: str) -> bool:
    """Ask the editor to apply `edit`; whether it did (a refusal is shown with its reason)."""
    reply = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))
    if not reply.applied:
        ls.show(types.MessageType.Warning, f"DICE: the editor did not apply the edit: {reply.failure_reason or 'no reason given'}")
    return reply.applied
