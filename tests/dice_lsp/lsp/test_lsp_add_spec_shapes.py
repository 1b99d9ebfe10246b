"""Add benchmark spec on kernels indexed in 2D and 3D, through the real server: the launch
covers the bounds the kernel checks on every axis it indexes (a 1D launch over W * H threads
leaves y at 0), the spec parses with the profiler's own reader, and nvcc compiles the file
(the real `dice check` command). A kernel whose y index is checked against nothing gets no
launch, and a warning saying why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types

from profiler.checks.compile import find_nvcc
from profiler.source.spec import parse_spec

STENCIL = """\
__global__ void laplace(const float* __restrict__ in, float* out, int W, int H)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = threadIdx.y + blockIdx.y * blockDim.y;
    if (x >= 1 && x < W - 1 && y >= 1 && y < H - 1) {
        out[y * W + x] = in[(y - 1) * W + x] + in[(y + 1) * W + x]
                       + in[y * W + x - 1] + in[y * W + x + 1] - 4.0f * in[y * W + x];
    }
}
"""

MATMUL = """\
#define TILE 32

__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int bx = blockIdx.x;
    int by = blockIdx.y;
    int row = by * TILE + ty;
    int col = bx * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        As[ty][tx] = (row < M && t * TILE + tx < K) ? A[row * K + t * TILE + tx] : 0.0f;
        Bs[ty][tx] = (col < N && t * TILE + ty < K) ? B[(t * TILE + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
"""

HEAT3D = """\
__global__ void heat3d(const double* u, double* v, double alpha, int nx, int ny, int nz)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int k = blockIdx.z * blockDim.z + threadIdx.z;
    if (i >= nx || j >= ny || k >= nz) return;
    const size_t at = ((size_t)k * ny + j) * nx + i;
    v[at] = u[at] * (1.0 - alpha);
}
"""

UNBOUNDED = """\
__global__ void rows(float* out, int W)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < W) out[y * W + x] = 1.0f;
}
"""


def rng(line: int, character: int) -> types.Range:
    return types.Range(types.Position(line, character), types.Position(line, character))


async def add_spec(editor, workspace: Path, name: str, source: str, line: int) -> str:
    path = workspace / name
    path.write_text(source)
    uri = editor.open(path)
    found = await editor.code_actions(uri, rng(line, 4))
    action = next(a for a in found if a.title == "Add benchmark spec")
    await editor.run_action(action)
    return editor.text(uri)


def nvcc_diagnostics(path: Path) -> list[dict]:
    """`dice check FILE --json` as a user runs it: nvcc's diagnostics of the whole file."""
    done = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "check", str(path), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.stdout, done.stderr
    return json.loads(done.stdout)["diagnostics"]


@pytest.mark.parametrize(("name", "source", "line", "kernel", "expected"), [
    ("laplace.cu", STENCIL, 2, "laplace", [
        "// dice: let W = 4096", "// dice: let H = 4096",
        "// dice: buffer in[H * W], out[H * W]",
        "// dice: launch grid=((W - 1 + 15) / 16, (H - 1 + 15) / 16), block=(16, 16)"]),
    # The tile width of the shared arrays is the block: 32 x 32 threads, one tile a block.
    ("matmul.cu", MATMUL, 12, "matmul", [
        "// dice: let M = 1024", "// dice: let N = 1024", "// dice: let K = 1024",
        "// dice: buffer A[M * K], B[K * N], C[M * N]",
        "// dice: launch grid=((N + 31) / 32, (M + 31) / 32), block=(32, 32)"]),
    ("heat3d.cu", HEAT3D, 5, "heat3d", [
        "// dice: let nx = 256", "// dice: let ny = 256", "// dice: let nz = 256", "// dice: let alpha = 1.5",
        "// dice: buffer u[nz * ny * nx], v[nz * ny * nx]",
        "// dice: launch grid=((nx + 7) / 8, (ny + 7) / 8, (nz + 3) / 4), block=(8, 8, 4)"]),
])
@pytest.mark.asyncio
async def test_the_spec_covers_every_axis_the_kernel_indexes(editor, workspace: Path, name, source, line, kernel,
                                                             expected):
    text = await add_spec(editor, workspace, name, source, line)
    added = [ln for ln in text.splitlines() if ln.startswith("// dice: ")]
    assert added == expected
    assert text.replace("".join(f"{ln}\n" for ln in added), "") == source, "only the spec lines are added"
    spec = parse_spec(text)[kernel]
    # Every index the kernel checks is reached: grid * block covers each bound.
    bounds = {"laplace": (4096 - 1, 4096 - 1, 1), "matmul": (1024, 1024, 1), "heat3d": (256, 256, 256)}[kernel]
    for g, b, bound in zip(spec.grid, spec.block, bounds):
        assert g * b >= bound and (g - 1) * b < bound, (spec.grid, spec.block)
    # Each buffer holds the sizes its subscripts span: W * H, M * K (etc.), nx * ny * nz.
    elements = {"laplace": 4096 * 4096, "matmul": 1024 * 1024, "heat3d": 256 ** 3}[kernel]
    assert set(spec.buffers.values()) == {elements}
    if find_nvcc() is None:
        pytest.skip("nvcc not installed: the spec parses; the compile check needs nvcc")
    path = workspace / name
    path.write_text(text)
    assert [d for d in nvcc_diagnostics(path) if d["severity"] == "error"] == []


@pytest.mark.asyncio
async def test_a_y_index_checked_against_nothing_gets_no_launch_and_says_why(editor, workspace: Path):
    text = await add_spec(editor, workspace, "rows.cu", UNBOUNDED, 2)
    assert text == UNBOUNDED, "no spec rather than one that leaves y unbounded"
    await editor.wait_for(lambda: any("cannot write a launch" in m for m in editor.messages()), what="the warning")
    warning = next(m for m in editor.messages() if "cannot write a launch" in m)
    assert "its y index `y` is checked against no bound" in warning, warning
