"""KernelBench documents for the GPU tests: hand-written ModelNew candidates (load_inline
CUDA) for two real problems, right and wrong, and Python-level cheats on a small problem."""

from __future__ import annotations

DIAG_MUL_NEW = '''
from torch.utils.cpp_extension import load_inline

diag_mul_source = r"""
#include <torch/extension.h>

__global__ void diag_mul_kernel(const float* a, const float* b, float* out, int n, int m)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < (long long)n * m) {
        out[idx] = a[ROW] * b[idx];
    }
}

torch::Tensor diag_mul(torch::Tensor a, torch::Tensor b)
{
    auto out = torch::empty_like(b);
    int n = b.size(0), m = b.size(1);
    long long total = (long long)n * m;
    int threads = 256;
    int blocks = (int)((total + threads - 1) / threads);
    diag_mul_kernel<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n, m);
    return out;
}
"""

diag_mul = load_inline(
    name="NAME",
    cpp_sources="torch::Tensor diag_mul(torch::Tensor a, torch::Tensor b);",
    cuda_sources=diag_mul_source,
    functions=["diag_mul"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return diag_mul.diag_mul(A.contiguous(), B.contiguous())
'''


def diag_mul_candidate(problem: str, row: str, name: str) -> str:
    """The problem file with a ModelNew whose kernel reads the diagonal at index `row`."""
    return problem + DIAG_MUL_NEW.replace("ROW", row).replace("NAME", name)


DIAG_RIGHT_ROW = "idx / m"
DIAG_WRONG_ROW = "idx % n"  # the column index: right only where A is constant

GEMM_NEW = '''
from torch.utils.cpp_extension import load_inline

scale_leaky_source = r"""
#include <torch/extension.h>

__global__ void scale_leaky_kernel(float* x, long long count, float multiplier, float slope)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        float v = x[i] * MULTIPLY;
        x[i] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor scale_leaky(torch::Tensor x, double multiplier, double slope)
{
    long long count = x.numel();
    int threads = 256;
    int blocks = (int)((count + threads - 1) / threads);
    scale_leaky_kernel<<<blocks, threads>>>(x.data_ptr<float>(), count, (float)multiplier, (float)slope);
    return x;
}
"""

scale_leaky = load_inline(
    name="NAME",
    cpp_sources="torch::Tensor scale_leaky(torch::Tensor x, double multiplier, double slope);",
    cuda_sources=scale_leaky_source,
    functions=["scale_leaky"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)  # same name: Model's weights are copied in
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        return scale_leaky.scale_leaky(self.gemm(x), self.multiplier, self.negative_slope)
'''


def gemm_candidate(problem: str, multiply: str, name: str) -> str:
    return problem + GEMM_NEW.replace("MULTIPLY", multiply).replace("NAME", name)


# A small problem of our own for the Python-level cheats.
RELU_PROBLEM = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64 * 1024 * 1024)]


def get_init_inputs():
    return []
"""

# Does its work on a stream of its own and returns without waiting: events recorded on the
# caller's stream see nothing. The output is right once the device is synchronized.
SIDE_STREAM_NEW = """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(20):
                out = torch.relu(x)
        return out
"""

# Computes once, then returns that first result for every later input.
CACHING_NEW = """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = None

    def forward(self, x):
        if self.first is None:
            self.first = torch.relu(x)
        return self.first
"""

HONEST_NEW = """

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
"""
