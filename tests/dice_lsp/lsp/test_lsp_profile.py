"""Profile a kernel without a GPU (compiled, "not timed: no GPU"), see it in the lens, the
hover and the diagnostics, and have the result dropped when the file changes on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from dice_lsp.core.cache import ResultCache
from dice_lsp.core.measured import live_keys

SAXPY = (Path(__file__).resolve().parents[3] / "examples" / "saxpy.cu").read_text()
KERNEL_LINE = next(i for i, line in enumerate(SAXPY.splitlines()) if line.startswith("__global__"))
IN_KERNEL = types.Range(types.Position(KERNEL_LINE + 2, 4), types.Position(KERNEL_LINE + 2, 4))
ON_NAME = types.Position(KERNEL_LINE, SAXPY.splitlines()[KERNEL_LINE].index("saxpy") + 2)


async def lens_titles(editor, uri: str) -> list[str]:
    lenses = await editor.client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
    return [lens.command.title for lens in lenses]


@pytest.mark.asyncio
async def test_profile_without_gpu_then_stale_result_dropped(editor, workspace: Path, local_gpu):
    if local_gpu is not None:
        pytest.skip(f"a GPU is here ({local_gpu}): test_lsp_gpu.py checks the timed results")
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri = editor.open(path)
    profile = next(a for a in await editor.code_actions(uri, IN_KERNEL) if a.title == "Profile this kernel")
    await editor.run_action(profile)

    await editor.wait_for(lambda: any(d.code == "no_gpu" for d in editor.client.diagnostics.get(uri, [])), timeout=120, what="profile verdict")
    (verdict,) = [d for d in editor.client.diagnostics[uri] if d.code]
    assert verdict.message == "saxpy: compiles; not timed: no GPU" and verdict.range.start.line == KERNEL_LINE
    assert await lens_titles(editor, uri) == ["compiles; not timed: no GPU"]
    hover = await editor.client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), ON_NAME))
    assert "not timed: no GPU" in hover.contents.value and "GPU: none (not timed)" in hover.contents.value

    # Reopening shows what was measured (it is cached on disk) ...
    editor.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    uri = editor.open(path)
    assert await lens_titles(editor, uri) == ["compiles; not timed: no GPU"]

    # ... until the file changes outside the editor (a git checkout): then the result is gone,
    # even once the old text comes back.
    editor.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    await editor.sync()  # the server knows the file is closed before it changes on disk
    cache = ResultCache(Path(editor.cache_dir))

    def measured() -> bool:  # the saxpy kernel's result, measured without a GPU, is on disk
        return any(cache.get(str(path), key) for key in live_keys(SAXPY, str(path), None))

    assert measured()
    path.write_text(SAXPY.replace("a * x[i] + y[i]", "y[i] + a * x[i]"))
    await editor.wait_for(lambda: not measured(), timeout=30, what="the watcher to drop the stale result")
    path.write_text(SAXPY)
    uri = editor.open(path)
    assert await lens_titles(editor, uri) == ["Profile this kernel"]
