"""Compile-only check of the CUDA in a KernelBench document's load_inline calls: real nvcc,
real torch headers (the CPU build of torch ships them), no GPU and no extension build."""

from __future__ import annotations

import ast

import pytest

import profiler
from profiler.checks.compile import find_nvcc
from profiler.checks.kernelbench import IMPLICIT_HEADERS, _place, inline_cuda, torch_include_dirs
from profiler.verdict.types import Diagnostic

DOCUMENT = '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_source = r"""
#include <torch/extension.h>

__global__ void scale_kernel(const float* x, float* y, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}

torch::Tensor scale(torch::Tensor x, double s)
{
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    return y;
}
"""

scale_ext = load_inline(name="scale_ext", cpp_sources="torch::Tensor scale(torch::Tensor x, double s);",
                        cuda_sources=scale_source, functions=["scale"], extra_cuda_cflags=["-O3", "-DSCALE=1"])


class ModelNew(nn.Module):
    def forward(self, x):
        return scale_ext.scale(x, 2.0)
'''


def line_of(document: str, text: str) -> int:
    return next(i for i, line in enumerate(document.splitlines(), 1) if text in line)


def test_load_inline_calls_are_read_without_running_anything():
    tree = ast.parse(DOCUMENT + 'other = load_inline("o", "", ["// a", scale_source], functions=[])\n')
    first, second = inline_cuda(tree)
    assert first.line == line_of(DOCUMENT, "scale_ext = load_inline")
    assert first.pieces[0].value.startswith("\n#include <torch/extension.h>")
    assert first.flags == ("-DSCALE=1",)  # -O3 changes no diagnostic; -D can
    assert [p.value for p in second.pieces] == ["// a", first.pieces[0].value]  # positional, a list


def test_lines_of_a_second_piece_and_of_a_string_with_escapes():
    document = 'a = "// one"\nb = "int x\\nint y"\next = load_inline("e", "", [a, b])\n'
    (call,) = inline_cuda(ast.parse(document))
    first = len(IMPLICIT_HEADERS) + 1
    # cuda.cu: 3 headers, "// one", then b's two lines. b's source has no newline where its
    # value has one, so its messages name the line inside the string instead.
    assert _place(Diagnostic(first, 4, "error", "m"), call, document) == Diagnostic(1, 4 + 5, "error", "m")
    assert _place(Diagnostic(first + 2, 1, "error", "m"), call, document) == \
        Diagnostic(2, 1, "error", "line 2 of the CUDA string: m")
    assert _place(Diagnostic(1, 1, "error", "in torch/types.h: m"), call, document) == \
        Diagnostic(3, 1, "error", "load_inline: in torch/types.h: m")


needs_tools = pytest.mark.skipif(find_nvcc() is None or torch_include_dirs() is None,
                                 reason="needs nvcc, torch's headers and Python's headers (python3-dev)")


@needs_tools
@pytest.mark.slow
def test_errors_land_inside_the_string_and_a_good_kernel_has_none():
    assert profiler.check(DOCUMENT, "scale.py") == []
    broken = DOCUMENT.replace("y[i] = s * x[i];", "y[i] = s * x[i] + missing_offset;").replace(
        "torch::empty_like(x);", "torch::empty_like(x, 1, 2, 3);")
    found = profiler.check(broken, "scale.py")
    print(found)
    device = line_of(broken, "missing_offset")
    host = line_of(broken, "torch::empty_like(x, 1, 2, 3)")
    assert any(d.line == device and d.severity == "error" and "missing_offset" in d.message
               and d.column == broken.splitlines()[device - 1].index("missing_offset") + 1 for d in found)
    assert any(d.line == host and d.severity == "error" for d in found)  # host code in the string too
    assert all(d.line in (device, host) for d in found), found  # torch's own header warnings are not shown


def test_a_python_error_comes_first_and_alone():
    broken = DOCUMENT.replace("def forward(self, x):", "def forward(self, x)")
    (syntax,) = profiler.check(broken, "scale.py")
    assert syntax.line == line_of(broken, "def forward(self, x)") and "SyntaxError" in syntax.message


PROBLEM = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(1024)]


def get_init_inputs():
    return []
'''


@needs_tools
@pytest.mark.slow
@pytest.mark.skipif(profiler.gpu_name() is not None, reason="checks the answer without a GPU")
def test_without_a_gpu_a_candidate_is_compiled_not_run():
    good = PROBLEM + DOCUMENT.split("import torch.nn as nn\n", 1)[1]
    bad = good.replace("y[i] = s * x[i];", "y[i] = s * x[i] + missing_offset;")
    compiles, broken = profiler.judge(PROBLEM, [good, bad], "problem.py", time_limit=60.0)
    assert (compiles.status, compiles.compiled, compiles.message) == ("no_gpu", True, "compiles; not timed: no GPU")
    assert compiles.time_ms is None and compiles.speedup is None
    assert broken.status == "compile_error" and broken.compiled is False
    assert broken.diagnostics[0].line == line_of(bad, "missing_offset")
    assert f"line {line_of(bad, 'missing_offset')}" in broken.message
