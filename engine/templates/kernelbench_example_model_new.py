import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int size) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < size) {
        out[i] = a[i] + b[i];
    }
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int size = a.numel();
    const int threads = 256;
    const int blocks = (size + threads - 1) / threads;
    add_kernel<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}
"""

add_cpp_source = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"

add = load_inline(
    name="add",
    cpp_sources=add_cpp_source,
    cuda_sources=add_source,
    functions=["add_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.add = add

    def forward(self, a, b):
        return self.add.add_cuda(a, b)
