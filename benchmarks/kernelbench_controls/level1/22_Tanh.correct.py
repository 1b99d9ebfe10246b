# Control for `dice bench --solutions`: a correct ModelNew for level1/22_Tanh.
# tanh: one grid-stride CUDA kernel, one thread per element (a control, not tuned).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void tanh_kernel(const float* __restrict__ in, float* __restrict__ out, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float x = in[i];
        out[i] = tanhf(x);
    }
}

torch::Tensor tanh_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "tanh_forward: float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n == 0) return y;
    long blocks = std::min<long>((n + 255) / 256, 65535L * 32);
    tanh_kernel<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

tanh_ext = load_inline(
    name="dice_control_tanh_correct",
    cpp_sources="torch::Tensor tanh_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["tanh_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tanh_ext.tanh_forward(x)
