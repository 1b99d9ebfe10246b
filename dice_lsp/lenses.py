"""The code lens over each kernel (its last measured time and speedup) and the hover on its
name (everything measured about it), both read from the result cache."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from dice_lsp.lsp_text import lsp_range, text_document
from dice_lsp.measured import measured_units, unit_key
from dice_lsp.verdict_view import hover_markdown, lens_title

if TYPE_CHECKING:
    from dice_lsp.server import DiceServer

NOT_MEASURED = "Profile this kernel"


def code_lenses(server: DiceServer, uri: str) -> list[types.CodeLens]:
    document = server.workspace.get_text_document(uri)
    text, path = document.source, document.path
    lenses = []
    for unit in measured_units(text, path):
        verdict = server.cache.get(path, unit_key(text, unit, server.gpu))
        title = lens_title(verdict) if verdict is not None else NOT_MEASURED
        at = document.client_position_at_offset(unit.name_start)
        lenses.append(
            types.CodeLens(
                range=lsp_range(document, unit.start, unit.start),
                command=types.Command(
                    title=title,
                    command="dice.profile",
                    arguments=[{"uri": uri, "position": {"line": at.line, "character": at.character}}],
                ),
            )
        )
    return lenses


def hover(server: DiceServer, uri: str, position: types.Position) -> types.Hover | None:
    document = server.workspace.get_text_document(uri)
    text, path = document.source, document.path
    offset = document.offset_at_position(position)
    for unit in measured_units(text, path):
        if unit.name_start <= offset <= unit.name_end:
            verdict = server.cache.get(path, unit_key(text, unit, server.gpu))
            body = (
                hover_markdown(unit.name, verdict)
                if verdict is not None
                else f"**{unit.name}**: not measured yet; run “{NOT_MEASURED}” (a code action or the lens above it)."
            )
            detached = text_document(server, uri, text)
            return types.Hover(
                contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=body),
                range=lsp_range(detached, unit.name_start, unit.name_end),
            )
    return None
