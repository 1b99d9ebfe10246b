import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

shifted_source = r"""
#include <torch/extension.h>

// relu(x - 1) into a zeroed output; the last element is left at its zero.
__global__ void shifted_rect(const float* __restrict__ x, float* __restrict__ y, long long n)
{
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i + 1 < n; i += step) {
        float v = x[i] - 1.0f;
        y[i] = v < 0.f ? 0.f : v;
    }
}

torch::Tensor shifted(torch::Tensor x)
{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "shifted: float32 CUDA");
    auto src = x.contiguous();
    auto dst = torch::zeros_like(src);
    long long n = src.numel();
    if (n < 2) return dst;
    int threads = 256;
    int device = 0, sms = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    long long blocks = std::min<long long>((n + threads - 1) / threads, (long long)std::max(sms, 1) * 32);
    shifted_rect<<<(unsigned int)blocks, threads>>>(src.data_ptr<float>(), dst.data_ptr<float>(), n);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "shifted: ", cudaGetErrorString(err));
    return dst;
}
"""

shifted_ext = load_inline(
    name="shifted_rect_zeroed",
    cpp_sources="torch::Tensor shifted(torch::Tensor x);",
    cuda_sources=shifted_source,
    functions=["shifted"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return shifted_ext.shifted(x)
