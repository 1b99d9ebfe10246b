# Control for `dice bench --solutions`: a correct ModelNew for level1/4_Matrix_vector_multiplication_.
# y = A @ x for A (M, K), x (K, 1): one block per row, a strided dot product per thread
# and a shared-memory reduction (a control, not tuned).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

constexpr int THREADS = 512;

__global__ void matvec_rows(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y, long k) {
    __shared__ float partial[THREADS];
    const float* row = a + blockIdx.x * k;
    float acc = 0.0f;
    for (long j = threadIdx.x; j < k; j += THREADS) acc += row[j] * x[j];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = partial[0];
}

torch::Tensor matvec_forward(torch::Tensor a, torch::Tensor x) {
    TORCH_CHECK(a.is_cuda() && x.is_cuda() && a.scalar_type() == torch::kFloat && x.scalar_type() == torch::kFloat,
                "matvec_forward: float32 CUDA tensors expected");
    TORCH_CHECK(a.dim() == 2 && x.dim() == 2 && x.size(1) == 1 && a.size(1) == x.size(0),
                "matvec_forward: (M, K) @ (K, 1) expected");
    a = a.contiguous();
    x = x.contiguous();
    auto y = torch::empty({a.size(0), 1}, a.options());
    if (y.numel() == 0) return y;
    matvec_rows<<<a.size(0), THREADS>>>(a.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), a.size(1));
    return y;
}
"""

matvec_ext = load_inline(
    name="dice_control_matvec_correct",
    cpp_sources="torch::Tensor matvec_forward(torch::Tensor a, torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["matvec_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matvec_ext.matvec_forward(A, B)
