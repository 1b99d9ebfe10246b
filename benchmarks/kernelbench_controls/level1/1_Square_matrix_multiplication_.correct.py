# Control for `dice bench --solutions`: a correct ModelNew for level1/1_Square_matrix_multiplication_.
# C = A @ B in float32 with 32x32 tiles in shared memory, one output element per thread
# (a textbook kernel: a control, not tuned; much slower than cuBLAS).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

constexpr int TILE = 32;

__global__ void matmul_tiled(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                             int m, int k, int n) {
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < k; t += TILE) {
        a_tile[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[(long)row * k + t + threadIdx.x] : 0.0f;
        b_tile[threadIdx.y][threadIdx.x] = (t + threadIdx.y < k && col < n) ? b[(long)(t + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += a_tile[threadIdx.y][i] * b_tile[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[(long)row * n + col] = acc;
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat,
                "matmul_forward: float32 CUDA tensors expected");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: shapes do not match");
    a = a.contiguous();
    b = b.contiguous();
    int m = a.size(0), k = a.size(1), n = b.size(1);
    auto c = torch::empty({m, n}, a.options());
    if (c.numel() == 0) return c;
    dim3 threads(TILE, TILE), blocks((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    matmul_tiled<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), m, k, n);
    return c;
}
"""

matmul_ext = load_inline(
    name="dice_control_square_matmul_correct",
    cpp_sources="torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["matmul_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A, B)
