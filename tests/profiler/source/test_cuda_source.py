"""Kernel signatures read with tree-sitter-cuda."""

from __future__ import annotations

import pytest

from profiler.source.cuda_source import Param, find_kernel, find_kernels

SOURCE = """\
#include <cuda_fp16.h>
// __global__ void in_a_comment(int x) {}
__device__ float helper(float x) { return x; }

template <typename T>
__global__ void __launch_bounds__(256) tmpl(const T* __restrict__ a, T* b, const int n) { }

extern "C" __global__ void k3(__half* x, unsigned long long n, float const* q, float* const r, int w[])
{
    const char* s = "__global__ void in_a_string(int x) {}";
}
"""


def test_finds_only_real_kernels_with_positions():
    kernels = find_kernels(SOURCE)
    assert [k.name for k in kernels] == ["tmpl", "k3"]
    tmpl, k3 = kernels
    assert tmpl.template and not k3.template
    assert tmpl.start == (4, 0)  # the template<> line belongs to the kernel
    assert k3.body_start == (8, 0) and k3.body_end == (10, 1)
    assert k3.end == (10, 1)


def test_parameters_kinds_and_constness():
    k3 = find_kernel(SOURCE, "k3")
    assert k3.params == (
        Param("x", "__half", pointer=True, const=False),
        Param("n", "unsigned long long", pointer=False, const=False),
        Param("q", "float", pointer=True, const=True),  # pointee const: an input
        Param("r", "float", pointer=True, const=False),  # only the pointer is const: an output
        Param("w", "int", pointer=True, const=False),
    )


def test_find_kernel_errors_say_why():
    with pytest.raises(ValueError, match="several kernels"):
        find_kernel(SOURCE, None)
    with pytest.raises(ValueError, match="no __global__ function named 'nope'"):
        find_kernel(SOURCE, "nope")
    with pytest.raises(ValueError, match="no __global__ function"):
        find_kernel("int main() { return 0; }", None)


def test_kernels_after_a_brace_left_open_are_still_found():
    """The walk skips function bodies (most of a file of thousands of kernels), but not one
    with a syntax error, which may hold the kernels after it while the user types."""
    source = (
        "__global__ void a(float* y)\n{\n    if (y) {\n        y[0] = 1.0f;\n}\n\n"
        "__global__ void b(float* y)\n{\n    y[0] = 2.0f;\n}\n"
    )
    assert [k.name for k in find_kernels(source)] == ["a", "b"]
