# Control for `dice bench --solutions`: a correct ModelNew for level1/32_HardTanh.
# clamp to [-1, 1]: one grid-stride CUDA kernel, one thread per element (a control, not tuned).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void hardtanh_kernel(const float* __restrict__ in, float* __restrict__ out, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float x = in[i];
        out[i] = fminf(fmaxf(x, -1.0f), 1.0f);
    }
}

torch::Tensor hardtanh_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "hardtanh_forward: float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n == 0) return y;
    long blocks = std::min<long>((n + 255) / 256, 65535L * 32);
    hardtanh_kernel<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

hardtanh_ext = load_inline(
    name="dice_control_hardtanh_correct",
    cpp_sources="torch::Tensor hardtanh_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["hardtanh_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return hardtanh_ext.hardtanh_forward(x)
