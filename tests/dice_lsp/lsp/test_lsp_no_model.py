"""A model that cannot be loaded is a message that says how to set one, never a dead server."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types


@pytest.fixture
def dice_settings(tmp_path: Path) -> dict:
    return {"dice": {"model": str(tmp_path / "no-such-checkpoint"), "candidates": 1, "maxTokens": 8}}


@pytest.mark.asyncio
async def test_missing_model_says_how_to_set_one(commands_editor, workspace: Path):
    editor = commands_editor
    path = workspace / "k.cu"
    path.write_text("__global__ void k(float* y, int n)\n{\n    int i = threadIdx.x;\n    if (i < n) y[i] = 0.0f;\n}\n")
    uri = editor.open(path)
    result = await editor.execute("dice.fill", {"uri": uri, "range": {"start": {"line": 3, "character": 15}, "end": {"line": 3, "character": 27}}})
    assert result["error"] is True
    assert 'Set the "dice.model" setting to "builtin"' in result["message"]
    assert any("Could not load the model" in m and "dice.model" in m for m in editor.messages())
    assert editor.statuses[-1]["model"] is None and editor.statuses[-1]["busy"] is False
    # The server still answers.
    assert await editor.code_actions(uri, types.Range(types.Position(2, 4), types.Position(2, 4)))
