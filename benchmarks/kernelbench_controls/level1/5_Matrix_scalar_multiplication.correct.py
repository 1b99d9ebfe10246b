# Control for `dice bench --solutions`: a correct ModelNew for level1/5_Matrix_scalar_multiplication.
# C = A * s: one grid-stride kernel, the scalar in float32 as torch computes it (a control, not tuned).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void scale_kernel(const float* __restrict__ a, float* __restrict__ c, float s, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        c[i] = a[i] * s;
    }
}

torch::Tensor scale_forward(torch::Tensor a, double s) {
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat, "scale_forward: float32 CUDA tensor expected");
    a = a.contiguous();
    auto c = torch::empty_like(a);
    long n = a.numel();
    if (n == 0) return c;
    long blocks = std::min<long>((n + 255) / 256, 65535L * 32);
    scale_kernel<<<blocks, 256>>>(a.data_ptr<float>(), c.data_ptr<float>(), (float)s, n);
    return c;
}
"""

scale_ext = load_inline(
    name="dice_control_matrix_scalar_correct",
    cpp_sources="torch::Tensor scale_forward(torch::Tensor a, double s);",
    cuda_sources=cuda_source,
    functions=["scale_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return scale_ext.scale_forward(A, float(s))
