# Control for `dice bench --solutions`: a WRONG ModelNew for level1/21_Sigmoid: it must not count as correct.
# The bug (a wrong constant): it computes sigmoid(2x), the form used inside tanh identities.
# One thread per element in a grid-stride loop; expf (not __expf) keeps fp32 accuracy.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sigmoid_cuda = r"""
#include <torch/extension.h>

__global__ void sigmoid_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        y[i] = 1.0f / (1.0f + expf(-2.0f * x[i]));
    }
}

torch::Tensor sigmoid_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "sigmoid_forward: float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel();
    if (n > 0) {
        long blocks = std::min<long>((n + 255) / 256, 65535L * 8);
        sigmoid_kernel<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    }
    return y;
}
"""

sigmoid_ext = load_inline(
    name="dice_control_sigmoid_wrong",
    cpp_sources="torch::Tensor sigmoid_forward(torch::Tensor x);",
    cuda_sources=sigmoid_cuda,
    functions=["sigmoid_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sigmoid_ext.sigmoid_forward(x)
