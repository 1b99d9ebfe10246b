"""The server without a model: capabilities, status, settings, the action list, benchmark
specs, compile diagnostics, lenses and hovers before anything is measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from ..conftest import SAXPY

NO_SPEC = """\
__global__ void scale(float* out, const float* in, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = s * in[i];
}
"""

BROKEN = """\
__global__ void broken(float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x
    if (i < n) out[i] = 1.0f;
}
"""


def rng(l1: int, c1: int, l2: int, c2: int) -> types.Range:
    return types.Range(types.Position(l1, c1), types.Position(l2, c2))


@pytest.mark.asyncio
async def test_initialize_advertises_commands_and_resolve(editor, local_gpu):
    assert editor.server_info.name == "dice-lsp"
    result = editor.server_capabilities
    commands = set(result.execute_command_provider.commands)
    assert {"dice.fill", "dice.optimize", "dice.profile", "dice.addSpec", "dice.applyCandidate", "dice.cancel"} <= commands
    assert result.code_action_provider.resolve_provider is True
    await editor.wait_for(lambda: any(s["message"].startswith("ready") for s in editor.statuses), what="dice/status ready")
    last = editor.statuses[-1]
    assert set(last) == {"model", "gpu", "sandbox", "busy", "message"}
    assert last["busy"] is False
    from profiler.sandbox.isolation import describe

    assert last["sandbox"] == describe()[1]  # what :checkhealth shows
    assert last["gpu"] == local_gpu
    assert ("no GPU" in last["message"]) == (local_gpu is None)


async def check_action_list(ed, resolves: bool, workspace: Path) -> None:
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri = ed.open(path)
    selection = await ed.code_actions(uri, rng(9, 8, 9, 30))
    titles = [a.title for a in selection]
    assert titles == ["Fill selection with DICE", "Optimize this kernel with DICE", "Profile this kernel"]
    kinds = [a.kind for a in selection]
    assert kinds == [types.CodeActionKind.RefactorRewrite, types.CodeActionKind.RefactorRewrite, types.CodeActionKind.Source]
    fill = selection[0]
    if resolves:
        assert fill.command is None and fill.data["command"] == "dice.fill"
        assert fill.data["args"] == {"uri": uri, "range": {"start": {"line": 9, "character": 8}, "end": {"line": 9, "character": 30}}}
    else:
        assert fill.command.command == "dice.fill" and fill.command.arguments[0]["uri"] == uri
    # A cursor outside every kernel offers nothing to optimize.
    assert await ed.code_actions(uri, rng(0, 0, 0, 0)) == []
    # Only what the client asks for.
    source_only = await ed.client.text_document_code_action_async(
        types.CodeActionParams(types.TextDocumentIdentifier(uri), rng(7, 4, 7, 4), types.CodeActionContext([], only=[types.CodeActionKind.Source]))
    )
    assert [a.title for a in source_only] == ["Profile this kernel"]


@pytest.mark.asyncio
async def test_action_list_carries_data(editor, workspace: Path):
    await check_action_list(editor, True, workspace)


@pytest.mark.asyncio
async def test_action_list_carries_commands_without_resolve(commands_editor, workspace: Path):
    await check_action_list(commands_editor, False, workspace)


async def check_add_spec(ed, workspace: Path) -> None:
    path = workspace / "scale.cu"
    path.write_text(NO_SPEC)
    uri = ed.open(path)
    found = await ed.code_actions(uri, rng(2, 4, 2, 4))
    add = next(a for a in found if a.title == "Add benchmark spec")
    assert add.kind == types.CodeActionKind.Source
    await ed.run_action(add)
    text = ed.text(uri)
    assert text.endswith(NO_SPEC), "the kernel itself is untouched"
    spec = text[: len(text) - len(NO_SPEC)]
    assert spec and all(line.startswith("// dice: ") for line in spec.splitlines())
    assert "launch" in spec and "buffer" in spec
    # With a spec in place the action is gone.
    found = await ed.code_actions(uri, rng(len(spec.splitlines()) + 2, 4, len(spec.splitlines()) + 2, 4))
    assert "Add benchmark spec" not in [a.title for a in found]


@pytest.mark.asyncio
async def test_add_benchmark_spec_inserts_lines_above_the_kernel(editor, workspace: Path):
    await check_add_spec(editor, workspace)


@pytest.mark.asyncio
async def test_add_benchmark_spec_through_command_and_apply_edit(commands_editor, workspace: Path):
    await check_add_spec(commands_editor, workspace)


@pytest.mark.asyncio
async def test_compile_errors_appear_on_open(editor, workspace: Path):
    path = workspace / "broken.cu"
    path.write_text(BROKEN)
    uri = editor.open(path)
    await editor.wait_for(lambda: editor.client.diagnostics.get(uri), timeout=120, what="compile diagnostics")
    errors = [d for d in editor.client.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Error]
    assert errors and all(d.source == "dice" for d in errors)
    assert errors[0].range.start.line in (2, 3), errors[0]  # the missing ';' is at the end of line 3 (1-based)


@pytest.mark.asyncio
async def test_bad_spec_is_a_diagnostic_at_its_line(editor, workspace: Path):
    path = workspace / "badspec.cu"
    path.write_text(SAXPY.replace("// dice: buffer x[n], y[n]", "// dice: buffer x[n], y[m]"))
    uri = editor.open(path)
    await editor.wait_for(lambda: editor.client.diagnostics.get(uri), timeout=120, what="spec diagnostics")
    spec_errors = [d for d in editor.client.diagnostics[uri] if "dice spec" in d.message]
    assert spec_errors and spec_errors[0].range.start.line == 2, editor.client.diagnostics[uri]


@pytest.mark.asyncio
async def test_bad_settings_are_reported_and_defaults_kept(editor):
    editor.client.set_configuration({"candidates": 0, "strategy": "random", "steps": 2, "bogus": 1}, section="dice")
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await editor.wait_for(lambda: sum("dice-lsp settings" in m for m in editor.messages()) >= 3, what="settings messages")
    text = "\n".join(editor.messages())
    assert "dice.candidates = 0 is not an integer from 1 to 64; using 4" in text
    assert 'dice.strategy = \'random\' is not "low_confidence_static" or "sequential" or "low_confidence_dynamic"' in text
    assert "unknown setting dice.bogus" in text


@pytest.mark.asyncio
async def test_lens_and_hover_before_any_measurement(editor, workspace: Path):
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri = editor.open(path)
    lenses = await editor.client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
    assert len(lenses) == 1 and lenses[0].range.start.line == 5
    assert lenses[0].command.title == "Profile this kernel" and lenses[0].command.command == "dice.profile"
    hover = await editor.client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(5, 18)))
    assert "saxpy" in hover.contents.value and "not measured yet" in hover.contents.value
    assert await editor.client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(8, 4))) is None


KERNELBENCH = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a):
        return a * 2


class ModelNew(nn.Module):
    def forward(self, a):
        return a + a


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
"""


@pytest.mark.asyncio
async def test_kernelbench_actions_on_model_and_model_new(editor, workspace: Path):
    path = workspace / "double.py"
    path.write_text(KERNELBENCH)
    uri = editor.open(path)
    for line in (4, 5, 9, 11):  # class Model, its forward, class ModelNew, its return
        titles = [a.title for a in await editor.code_actions(uri, rng(line, 4, line, 4))]
        assert titles == ["Optimize this kernel with DICE", "Profile this kernel"], (line, titles)
    assert await editor.code_actions(uri, rng(14, 4, 14, 4)) == []  # in get_inputs
    lenses = await editor.client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
    assert [lens.range.start.line for lens in lenses] == [9]  # over ModelNew, what is timed


KERNELBENCH_BROKEN_CUDA = '''\
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
__global__ void twice_kernel(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + no_such_value;
}
torch::Tensor twice(torch::Tensor x)
{
    auto y = torch::empty_like(x);
    twice_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""

ext = load_inline(name="twice_ext", cpp_sources="torch::Tensor twice(torch::Tensor x);", cuda_sources=source,
                  functions=["twice"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.twice(x)
'''


@pytest.mark.asyncio
@pytest.mark.slow
async def test_kernelbench_cuda_errors_show_inside_the_string_on_open(editor, workspace: Path):
    """nvcc checks the load_inline CUDA on open (no GPU, no build): the error is on its line."""
    from profiler.checks.compile import find_nvcc
    from profiler.checks.kernelbench import torch_include_dirs

    if find_nvcc() is None or torch_include_dirs() is None:
        pytest.skip("needs nvcc, torch's headers and Python's headers (python3-dev)")
    path = workspace / "twice.py"
    path.write_text(KERNELBENCH_BROKEN_CUDA)
    uri = editor.open(path)
    await editor.wait_for(lambda: editor.client.diagnostics.get(uri), timeout=240, what="the check on open")
    text = "    if (i < n) y[i] = 2.0f * x[i] + no_such_value;"
    line = KERNELBENCH_BROKEN_CUDA.splitlines().index(text)
    (error,) = editor.client.diagnostics[uri]
    assert error.severity == types.DiagnosticSeverity.Error and "no_such_value" in error.message
    assert error.range.start == types.Position(line, text.index("no_such_value"))


@pytest.mark.asyncio
async def test_compile_diagnostics_follow_edits_when_asked(editor, workspace: Path):
    editor.client.set_configuration({"diagnosticsOnChange": True, "debounceMs": 50}, section="dice")
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    path = workspace / "scale.cu"
    path.write_text(NO_SPEC)
    uri = editor.open(path)
    await editor.wait_for(lambda: uri in editor.client.diagnostics, timeout=120, what="the check on open")
    assert list(editor.client.diagnostics[uri]) == []
    editor.change(uri, rng(3, 33, 3, 34), "")  # drop the ';' after `s * in[i]`
    await editor.wait_for(lambda: editor.client.diagnostics.get(uri), timeout=120, what="the check after the edit")
    assert any(d.severity == types.DiagnosticSeverity.Error for d in editor.client.diagnostics[uri])
