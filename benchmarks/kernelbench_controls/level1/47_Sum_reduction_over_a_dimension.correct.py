# Control for `dice bench --solutions`: a correct ModelNew for level1/47_Sum_reduction_over_a_dimension.
# Sum over dim 1 of a 3-D tensor (keepdim): one thread per output element, walking the
# reduced dimension; neighbouring threads read neighbouring columns (a control, not tuned).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void sum_dim1(const float* __restrict__ x, float* __restrict__ out, long outer, long reduce, long inner) {
    long index = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (index >= outer * inner) return;
    long o = index / inner, i = index % inner;
    const float* p = x + o * reduce * inner + i;
    float s = 0.0f;
    for (long r = 0; r < reduce; ++r) s += p[r * inner];
    out[index] = s;
}

torch::Tensor sum_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.dim() == 3,
                "sum_forward: 3-D float32 CUDA tensor expected");
    x = x.contiguous();
    long outer = x.size(0), reduce = x.size(1), inner = x.size(2);
    auto out = torch::empty({outer, 1, inner}, x.options());
    if (out.numel() == 0) return out;
    long threads = 256, blocks = (outer * inner + threads - 1) / threads;
    sum_dim1<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), outer, reduce, inner);
    return out;
}
"""

sum_ext = load_inline(
    name="dice_control_sum_dim1_correct",
    cpp_sources="torch::Tensor sum_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["sum_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        assert dim == 1, "this control sums over dim 1 of a 3-D tensor"
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_forward(x)
