# Control for `dice bench --solutions`: a correct ModelNew for level1/24_LogSoftmax.
# log_softmax over dim 1 of a 2-D tensor: one block per row, three passes (max, sum of exp,
# write), block reductions in shared memory (a control, not tuned).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

constexpr int THREADS = 512;

// The block's reduction of `v` (max or sum); every thread gets the result.
template <bool IS_MAX>
__device__ float block_reduce(float v, float* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            float other = shared[threadIdx.x + stride];
            shared[threadIdx.x] = IS_MAX ? fmaxf(shared[threadIdx.x], other) : shared[threadIdx.x] + other;
        }
        __syncthreads();
    }
    float result = shared[0];
    __syncthreads();
    return result;
}

__global__ void log_softmax_rows(const float* __restrict__ in, float* __restrict__ out, long cols) {
    __shared__ float shared[THREADS];
    const float* row = in + blockIdx.x * cols;
    float* out_row = out + blockIdx.x * cols;
    float m = -INFINITY;
    for (long j = threadIdx.x; j < cols; j += THREADS) m = fmaxf(m, row[j]);
    m = block_reduce<true>(m, shared);
    float s = 0.0f;
    for (long j = threadIdx.x; j < cols; j += THREADS) s += expf(row[j] - m);
    s = block_reduce<false>(s, shared);
    float log_sum = logf(s);
    for (long j = threadIdx.x; j < cols; j += THREADS) out_row[j] = row[j] - m - log_sum;
}

torch::Tensor log_softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.dim() == 2,
                "log_softmax_forward: 2-D float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    log_softmax_rows<<<x.size(0), THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}
"""

log_softmax_ext = load_inline(
    name="dice_control_log_softmax_correct",
    cpp_sources="torch::Tensor log_softmax_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["log_softmax_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        assert dim in (1, -1), "this control handles dim 1 of a 2-D tensor"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return log_softmax_ext.log_softmax_forward(x)
