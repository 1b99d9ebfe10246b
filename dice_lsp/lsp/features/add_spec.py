"""Add benchmark spec: the `// dice:` lines for the kernel under the cursor, inserted above it."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from dice_lsp.core.targets import TargetError, kernel_at, language_of
from dice_lsp.core.text_offsets import offset_at_point
from dice_lsp.lsp.edits import apply_edit, replace_edit
from dice_lsp.lsp.request_args import document_snapshot, offset_of
from dice_lsp.lsp.session import Session  # at run time: pygls evaluates handlers' annotations
from profiler.source.spec import spec_template


async def add_spec_edit(ls: Session, args: Any) -> types.WorkspaceEdit:
    """The `// dice:` lines for the kernel at args' position, inserted above it."""
    snapshot = await document_snapshot(ls, args)
    if language_of(snapshot.path) != "cuda":
        raise TargetError("benchmark specs are for .cu/.cuh files; a KernelBench file is its own benchmark")
    kernel = kernel_at(snapshot.text, offset_of(ls, snapshot, args))
    if kernel is None:
        raise TargetError("put the cursor inside a __global__ function to add its benchmark spec")
    try:
        lines = spec_template(snapshot.text, kernel.name)
    except ValueError as exc:
        raise TargetError(str(exc)) from exc
    line_start = offset_at_point(snapshot.text, (kernel.start[0], 0))
    return replace_edit(ls, snapshot.uri, snapshot.version, snapshot.text, line_start, line_start, lines)


async def add_spec_command(ls: Session, *args: Any) -> dict:
    try:
        edit = await add_spec_edit(ls, args[0] if args else None)
    except (TargetError, ValueError) as exc:
        ls.show(types.MessageType.Warning, f"DICE: {exc}")
        return {"applied": False, "error": str(exc)}
    return {"applied": await apply_edit(ls, edit, "DICE: add benchmark spec")}
