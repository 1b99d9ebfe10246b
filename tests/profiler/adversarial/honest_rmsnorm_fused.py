import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

rms_source = r"""
#include <torch/extension.h>

// x is (batch, C, spatial...) contiguous; the mean of squares runs over C at each spatial
// position. One thread per (batch, position): it keeps its C values in registers, so x is
// read once and the output written once (eager PyTorch makes five passes: x**2, the mean,
// then x / rms reading x again).
template <int C>
__global__ void rms_norm_channels(const float* __restrict__ x, float* __restrict__ y, long long spatial,
                                  long long positions, float eps)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= positions) return;
    long long b = p / spatial, s = p - b * spatial;
    const float* xp = x + b * C * spatial + s;
    float* yp = y + b * C * spatial + s;
    float v[C];
    float acc = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
        v[c] = xp[(long long)c * spatial];
        acc += v[c] * v[c];
    }
    float rms = sqrtf(acc / C + eps);
#pragma unroll
    for (int c = 0; c < C; ++c) yp[(long long)c * spatial] = v[c] / rms;
}

// Any channel count: two reads of x.
__global__ void rms_norm_any(const float* __restrict__ x, float* __restrict__ y, long long channels,
                             long long spatial, long long positions, float eps)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= positions) return;
    long long b = p / spatial, s = p - b * spatial;
    const float* xp = x + b * channels * spatial + s;
    float* yp = y + b * channels * spatial + s;
    float acc = 0.0f;
    for (long long c = 0; c < channels; ++c) {
        float v = xp[c * spatial];
        acc += v * v;
    }
    float rms = sqrtf(acc / channels + eps);
    for (long long c = 0; c < channels; ++c) yp[c * spatial] = xp[c * spatial] / rms;
}

torch::Tensor rms_norm(torch::Tensor x, double eps)
{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() >= 2, "rms_norm: float32 CUDA, 2+ dims");
    auto src = x.contiguous();
    auto dst = torch::empty_like(src);
    long long channels = src.size(1);
    long long spatial = channels ? src.numel() / (src.size(0) * channels) : 0;
    long long positions = src.size(0) * spatial;
    if (positions == 0) return dst;
    int threads = 256;
    unsigned int blocks = (unsigned int)((positions + threads - 1) / threads);
    if (channels == 64) {
        rms_norm_channels<64><<<blocks, threads>>>(src.data_ptr<float>(), dst.data_ptr<float>(), spatial,
                                                    positions, (float)eps);
    } else {
        rms_norm_any<<<blocks, threads>>>(src.data_ptr<float>(), dst.data_ptr<float>(), channels, spatial,
                                          positions, (float)eps);
    }
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "rms_norm: ", cudaGetErrorString(err));
    return dst;
}
"""

rms_ext = load_inline(
    name="rms_norm_channels",
    cpp_sources="torch::Tensor rms_norm(torch::Tensor x, double eps);",
    cuda_sources=rms_source,
    functions=["rms_norm"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_ext.rms_norm(x, self.eps)
