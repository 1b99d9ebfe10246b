"""load_inline build errors mapped back into the Python document's CUDA string.

The files are laid out as torch's load_inline writes them (three #include lines, then the
cuda_sources string, in BUILD_DIR/cuda.cu) and the log is nvcc's format; the mapping is the
real profiler code. (Building for real needs a CUDA torch: see test_gpu_kernelbench_judge.)
"""

from __future__ import annotations

from profiler.run.kernelbench import map_build_log

DOCUMENT = '''\
import torch
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>

__global__ void k(float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = undefined_thing;
}
"""

ext = load_inline(name="k", cpp_sources="", cuda_sources=source, functions=[])
'''


def test_error_lands_on_the_line_inside_the_string(tmp_path):
    source = DOCUMENT.split('"""')[1]
    build = tmp_path / "k"
    build.mkdir()
    cuda_cu = build / "cuda.cu"
    cuda_cu.write_text("\n".join(["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>",
                                  source]))
    file_line = cuda_cu.read_text().splitlines().index("    if (i < n) out[i] = undefined_thing;") + 1
    log = (
        "Error building extension 'k': [1/2] nvcc -c " + str(cuda_cu) + " -o cuda.cuda.o\n"
        "FAILED: cuda.cuda.o\n"
        f'{cuda_cu}({file_line}): error: identifier "undefined_thing" is undefined\n'
        "      if (i < n) out[i] = undefined_thing;\n"
        "                          ^\n\n"
        f'/usr/include/something.h(3): warning: unrelated header warning\n\n'
        f'1 error detected in the compilation of "{cuda_cu}".\n'
        "ninja: build stopped: subcommand failed.\n"
    )
    (diag,) = map_build_log(log, DOCUMENT)
    doc_lines = DOCUMENT.splitlines()
    assert doc_lines[diag.line - 1] == "    if (i < n) out[i] = undefined_thing;"
    assert diag.column == doc_lines[diag.line - 1].index("undefined_thing") + 1
    assert diag.severity == "error" and "undefined_thing" in diag.message


def test_log_without_a_readable_file_maps_nothing():
    assert map_build_log("/nonexistent/cuda.cu(3): error: x\n", DOCUMENT) == []
