"""What a real editor sends that the server got wrong: percent-encoded paths, and a job sent
before the server has read the client's settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from ..conftest import start_editor
from .test_lsp_basics import BROKEN

pytestmark = pytest.mark.asyncio


async def test_a_path_with_space_non_ascii_and_percent_gets_diagnostics(editor, workspace: Path):
    """VS Code and Neovim percent-encode such paths; the documents were stored under the
    unquoted URI and looked up by the raw one, so no diagnostics ever came."""
    folder = workspace / "My Projects" / "ünï%20code"
    folder.mkdir(parents=True)
    path = folder / "bröken 100%.cu"
    path.write_text(BROKEN)
    uri = editor.open(path)
    assert "%20" in uri and "%25" in uri and "%C3%B6" in uri
    await editor.wait_for(lambda: editor.client.diagnostics.get(uri), timeout=120, what="compile diagnostics")
    assert any(d.severity == types.DiagnosticSeverity.Error for d in editor.client.diagnostics[uri])
    # Hover and actions find the document under the same URI.
    actions = await editor.code_actions(uri, types.Range(types.Position(2, 4), types.Position(2, 4)))
    assert any(a.title == "Optimize this kernel with DICE" for a in actions)


async def test_a_fill_right_after_initialized_uses_the_clients_settings(lsp: LanguageClient, workspace: Path):
    """The settings come by workspace/configuration, asked once `initialized` arrives; a fill
    sent at once ran with what initializationOptions said (or the defaults)."""
    lsp.set_configuration({"model": str(workspace / "model-from-configuration"), "candidates": 1}, section="dice")
    options = {"dice": {"model": str(workspace / "model-from-initialization-options")}}
    editor = await start_editor(lsp, lsp.dice_capabilities, workspace, options)
    path = workspace / "k.cu"
    path.write_text("__global__ void k(float* y, int n)\n{\n    int i = threadIdx.x;\n    if (i < n) y[i] = 0.0f;\n}\n")
    uri = editor.open(path)
    result = await editor.execute("dice.fill", {"uri": uri, "range": {"start": {"line": 3, "character": 15}, "end": {"line": 3, "character": 27}}})
    assert result["error"] is True
    assert "model-from-configuration" in result["message"], result["message"]
    await lsp.shutdown_session()
