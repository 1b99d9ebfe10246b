# Control for `dice bench --solutions`: a correct ModelNew for level1/20_LeakyReLU.
# LeakyReLU with the problem's slope: one grid-stride CUDA kernel, one thread per element (a control, not tuned).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void leakyrelu_kernel(const float* __restrict__ in, float* __restrict__ out, long n, float p) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float x = in[i];
        out[i] = x > 0.0f ? x : x * p;
    }
}

torch::Tensor leakyrelu_forward(torch::Tensor x, double p) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "leakyrelu_forward: float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n == 0) return y;
    long blocks = std::min<long>((n + 255) / 256, 65535L * 32);
    leakyrelu_kernel<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (float)p);
    return y;
}
"""

leakyrelu_ext = load_inline(
    name="dice_control_leakyrelu_correct",
    cpp_sources="torch::Tensor leakyrelu_forward(torch::Tensor x, double p);",
    cuda_sources=cuda_source,
    functions=["leakyrelu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leakyrelu_ext.leakyrelu_forward(x, self.negative_slope)
