"""The code lens over each kernel (its last measured time and speedup) and the hover on its
name (everything measured about it), both read from the result cache."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from dice_lsp.verdict_view import hover_markdown, lens_title

if TYPE_CHECKING:
    from pygls.workspace import PositionCodec

    from dice_lsp.cache import ResultCache
    from dice_lsp.document_analysis import Analysis

NOT_MEASURED = "Profile this kernel"


def _json_position(position: types.Position) -> dict[str, int]:
    return {"line": position.line, "character": position.character}


def code_lenses(analysis: Analysis, uri: str, cache: ResultCache, gpu: str | None, codec: PositionCodec) -> list[dict]:
    """One lens per kernel, as LSP's JSON (built in a worker thread: it reads the result
    cache, and a file may have thousands of kernels)."""
    verdicts = cache.get_many(analysis.path, analysis.unit_keys(gpu))
    lenses = []
    for unit, key in zip(analysis.units, analysis.unit_keys(gpu)):
        verdict = verdicts.get(key)
        title = lens_title(verdict) if verdict is not None else NOT_MEASURED
        start = _json_position(analysis.position(unit.start, codec))
        at = _json_position(analysis.position(unit.name_start, codec))
        lenses.append({
            "range": {"start": start, "end": start},
            "command": {"title": title, "command": "dice.profile", "arguments": [{"uri": uri, "position": at}]},
        })
    return lenses


def hover(
    analysis: Analysis, position: types.Position, cache: ResultCache, gpu: str | None, codec: PositionCodec
) -> types.Hover | None:
    offset = analysis.offset(position, codec)
    index = analysis.unit_index_at(offset)
    unit = None if index is None else analysis.units[index]
    if unit is None or not unit.name_start <= offset <= unit.name_end:
        return None
    verdict = cache.get(analysis.path, analysis.unit_keys(gpu)[index])
    body = (
        hover_markdown(unit.name, verdict)
        if verdict is not None
        else f"**{unit.name}**: not measured yet; run “{NOT_MEASURED}” (a code action or the lens above it)."
    )
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=body),
        range=analysis.range(unit.name_start, unit.name_end, codec),
    )
