"""Timed results on a real GPU (run on the device machine; skipped elsewhere): the lens and the
hover of a profiled kernel carry a measured time and the GPU's name, a KernelBench ModelNew
shows its speedup over Model, and a job picks the candidate that is correct and faster."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from lsprotocol import types

from dice_lsp.core.config import Settings
from dice_lsp.core.jobs import Snapshot, judge
from dice_lsp.core.targets import optimize_target
from engine.types import Candidate

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[3]
SAXPY = (REPO / "examples" / "saxpy.cu").read_text()
SAXPY_LINE = next(i for i, line in enumerate(SAXPY.splitlines()) if line.startswith("__global__"))

# y = 2x over a 4096 x 4096 matrix, thread i handling element (i % 4096, i / 4096): neighbouring
# threads are 16 KB apart, every access a separate memory transaction. Reading along rows
# (thread i handles element i) does the same work coalesced, several times faster.
STRIDED = """\
// dice: let n = 4096 * 4096
// dice: buffer x[n], y[n]
// dice: launch grid=n / 256, block=256
__global__ void twice(const float* __restrict__ x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = (i % 4096) * 4096 + i / 4096;
        y[j] = 2.0f * x[j];
    }
}
"""
COALESCED_KERNEL = """\
__global__ void twice(const float* __restrict__ x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = 2.0f * x[i];
    }
}"""

# Model makes three passes over 64M floats; ModelNew fuses them into one.
KERNELBENCH_FUSED = '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x * 2.0
        y = y + 1.0
        return torch.relu(y)


def get_inputs():
    return [torch.randn(1 << 26)]


def get_init_inputs():
    return []


fused_source = r"""
#include <torch/extension.h>

__global__ void fused(const float* x, float* y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(2.0f * x[i] + 1.0f, 0.0f);
}

torch::Tensor fused_forward(torch::Tensor x)
{
    auto y = torch::empty_like(x);
    long long n = x.numel();
    fused<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

fused_module = load_inline(
    name="dice_lsp_gpu_test_fused",
    cpp_sources="torch::Tensor fused_forward(torch::Tensor x);",
    cuda_sources=fused_source,
    functions=["fused_forward"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return fused_module.fused_forward(x.contiguous())
'''


@pytest.fixture
def dice_settings() -> dict:
    """The built-in model, for the fill below; the profile tests load no model."""
    return {"dice": {"model": "builtin", "candidates": 4, "maxTokens": 24, "temperature": 0.7}}


async def profile_at(editor, path: Path, line: int) -> tuple[str, list[types.CodeLens]]:
    uri = editor.open(path)
    spot = types.Range(types.Position(line, 8), types.Position(line, 8))
    profile = next(a for a in await editor.code_actions(uri, spot) if a.title == "Profile this kernel")
    await editor.run_action(profile)
    await editor.wait_for(lambda: any(d.code for d in editor.client.diagnostics.get(uri, [])), timeout=540, what="profile verdict")
    lenses = await editor.client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
    return uri, lenses


@pytest.mark.asyncio
async def test_profiled_kernel_shows_time_in_lens_and_hover(editor, workspace: Path, local_gpu):
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri, lenses = await profile_at(editor, path, SAXPY_LINE + 2)
    (verdict,) = [d for d in editor.client.diagnostics[uri] if d.code]
    print("verdict:", verdict.code, verdict.message)
    (lens,) = lenses
    print("lens:", lens.command.title)
    assert re.fullmatch(rf"\d+(\.\d+)? ms on {re.escape(local_gpu)}", lens.command.title), lens.command.title
    name = types.Position(SAXPY_LINE, SAXPY.splitlines()[SAXPY_LINE].index("saxpy") + 1)
    hover = await editor.client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), name))
    print("hover:\n" + hover.contents.value)
    assert "- time: " in hover.contents.value and f"- GPU: {local_gpu}" in hover.contents.value


@pytest.mark.asyncio
async def test_kernelbench_model_new_shows_its_speedup(editor, workspace: Path, local_gpu):
    path = workspace / "fused.py"
    path.write_text(KERNELBENCH_FUSED)
    line = KERNELBENCH_FUSED.splitlines().index("class ModelNew(nn.Module):") + 3
    uri, lenses = await profile_at(editor, path, line)
    (verdict,) = [d for d in editor.client.diagnostics[uri] if d.code]
    print("verdict:", verdict.code, verdict.message)
    assert verdict.code == "faster", verdict.message
    (lens,) = lenses
    print("lens:", lens.command.title)
    assert re.fullmatch(rf"\d+(\.\d+)? ms, \d+\.\dx faster on {re.escape(local_gpu)}", lens.command.title)
    hover = await editor.client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line - 3, 8))
    )
    print("hover:\n" + hover.contents.value)
    assert "95% interval" in hover.contents.value and "- baseline: " in hover.contents.value


def test_job_picks_the_correct_and_faster_candidate(tmp_path: Path, local_gpu):
    """The pipeline after the model: a strided kernel, a coalesced rewrite and a wrong one."""
    path = tmp_path / "twice.cu"
    path.write_text(STRIDED)
    snapshot = Snapshot(path.as_uri(), 1, str(path), STRIDED)
    target = optimize_target(STRIDED, str(path), kernel="twice")
    wrong = COALESCED_KERNEL.replace("2.0f * x[i]", "2.0f * fabsf(x[i])")
    candidates = [Candidate(text, 0, 0, 0.0, "eos") for text in (wrong, COALESCED_KERNEL)]
    reports: list[str] = []
    result = asyncio.run(judge(snapshot, target, candidates, Settings(time_limit=120), lambda m, p: reports.append(m)))
    for i, (_, verdict, _) in enumerate(result.candidates):
        print(f"candidate {i + 1}: {verdict.status}: {verdict.message}")
    assert [v.status for _, v, _ in result.candidates] == ["wrong", "faster"]
    assert result.best == 1 and result.gpu == local_gpu
    answer = result.to_json()
    assert answer["candidates"][1]["speedup"] > 1.5 and answer["candidates"][1]["correct"] is True
    assert answer["best_text"] == STRIDED[: target.start] + COALESCED_KERNEL + STRIDED[target.end :]
    assert "judging: candidate 2 of 2" in reports


@pytest.mark.asyncio
async def test_fill_with_the_builtin_model_is_judged_on_the_gpu(editor, workspace: Path, local_gpu):
    """The whole pipeline on the device: whatever the model writes is judged there (timed when it
    compiles and is correct), and the best correct-and-faster candidate, if any, is applied."""
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri = editor.open(path)
    statement = SAXPY.splitlines().index("        y[i] = a * x[i] + y[i];")
    args = {"uri": uri, "range": {"start": {"line": statement, "character": 8}, "end": {"line": statement, "character": 31}}}
    result = await editor.execute("dice.fill", args)
    print("answer:", result)
    assert result["candidates"] and not result["error"], result
    assert result["gpu"] == local_gpu
    judged = {"faster", "not_faster", "wrong", "compile_error", "crash", "timeout"}
    assert {c["status"] for c in result["candidates"]} <= judged, "judged on the GPU, never 'no_gpu' here"
    if result["best"] is None:
        assert result["applied"] is False
    else:
        assert result["applied"] is True and result["candidates"][result["best"]]["status"] == "faster"
        lenses = await editor.client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
        print("lens:", [lens.command.title for lens in lenses])
        assert "x faster on" in lenses[0].command.title
