# Control for `dice bench --solutions`: a WRONG ModelNew for level1/19_ReLU: it must not count as correct.
# The bug (a wrong activation constant): negative inputs leak through with slope 0.1,
# as LeakyReLU would, instead of becoming 0. Caught only with signed test inputs.
# Vectorized (float4) ReLU with a scalar tail, so it is right for any element count.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_cuda = r"""
#include <torch/extension.h>

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = (v.x > 0.0f ? v.x : 0.1f * v.x); v.y = (v.y > 0.0f ? v.y : 0.1f * v.y); v.z = (v.z > 0.0f ? v.z : 0.1f * v.z); v.w = (v.w > 0.0f ? v.w : 0.1f * v.w);
        y[i] = v;
    }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.1f * x[i];
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "relu_forward: float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    long n4 = n / 4;
    if (n4 > 0) {
        long blocks = std::min<long>((n4 + 255) / 256, 65535L * 8);
        relu_vec4<<<blocks, 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
                                   reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    long tail = n - n4 * 4;
    if (tail > 0) relu_tail<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    return y;
}
"""

relu_ext = load_inline(
    name="dice_control_relu_wrong",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=relu_cuda,
    functions=["relu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
