# Control for `dice bench --solutions`: a correct ModelNew for level1/31_ELU.
# ELU with the problem's alpha: one grid-stride CUDA kernel, one thread per element (a control, not tuned).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void elu_kernel(const float* __restrict__ in, float* __restrict__ out, long n, float p) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float x = in[i];
        out[i] = x > 0.0f ? x : p * expm1f(x);
    }
}

torch::Tensor elu_forward(torch::Tensor x, double p) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "elu_forward: float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n == 0) return y;
    long blocks = std::min<long>((n + 255) / 256, 65535L * 32);
    elu_kernel<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (float)p);
    return y;
}
"""

elu_ext = load_inline(
    name="dice_control_elu_correct",
    cpp_sources="torch::Tensor elu_forward(torch::Tensor x, double p);",
    cuda_sources=cuda_source,
    functions=["elu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return elu_ext.elu_forward(x, self.alpha)
