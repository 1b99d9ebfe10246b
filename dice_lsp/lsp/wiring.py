"""Which handler answers which LSP method and command: the one place features are hooked
on a server. `create_server` builds one server per editor connection.

Handlers live in their feature's module under lsp/features/ and receive the server as a
Session; none of them imports this module or the server's state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lsprotocol import types

from dice_lsp.lsp.features import add_spec, candidates, code_actions, documents, generate, lenses, profile
from dice_lsp.lsp.state import DiceServer

FEATURES: list[tuple[str, Any, Callable]] = [
    (types.INITIALIZE, None, documents.initialize),
    (types.INITIALIZED, None, documents.initialized),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, documents.did_change_configuration),
    (types.TEXT_DOCUMENT_DID_OPEN, None, documents.did_open),
    (types.TEXT_DOCUMENT_DID_CHANGE, None, documents.did_change),
    (types.TEXT_DOCUMENT_DID_SAVE, None, documents.did_save),
    (types.TEXT_DOCUMENT_DID_CLOSE, None, documents.did_close),
    (
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.RefactorRewrite,
                types.CodeActionKind.Source,
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.Refactor,
            ],
            resolve_provider=True,
        ),
        code_actions.code_action,
    ),
    (types.CODE_ACTION_RESOLVE, None, code_actions.resolve_code_action),
    (types.TEXT_DOCUMENT_CODE_LENS, None, lenses.code_lens),
    (types.TEXT_DOCUMENT_HOVER, None, lenses.hover_kernel),
    (types.SHUTDOWN, None, documents.shutdown),
]

COMMANDS: list[tuple[str, Callable]] = [
    (code_actions.FILL, generate.fill_command),
    (code_actions.OPTIMIZE, generate.optimize_command),
    (code_actions.PROFILE, profile.profile_command),
    (code_actions.ADD_SPEC, add_spec.add_spec_command),
    (code_actions.APPLY_CANDIDATE, candidates.apply_candidate_command),
    (code_actions.SHOW_CANDIDATES, candidates.show_candidates_command),
    (code_actions.CANCEL, candidates.cancel_command),
]


def create_server() -> DiceServer:
    """A server with every handler registered: one per editor connection."""
    ls = DiceServer()
    for name, options, handler in FEATURES:
        ls.feature(name, options)(handler)
    for name, handler in COMMANDS:
        ls.command(name)(handler)
    return ls
