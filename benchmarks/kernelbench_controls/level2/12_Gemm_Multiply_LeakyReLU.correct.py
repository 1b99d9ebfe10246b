# Control for `dice bench --solutions`: a correct ModelNew for level2/12_Gemm_Multiply_LeakyReLU.
# The GEMM stays in cuBLAS (torch.mm without bias); one fused kernel then adds the bias,
# multiplies and applies LeakyReLU in place, instead of eager's three passes over the output.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

epilogue_cuda = r"""
#include <torch/extension.h>

__global__ void bias_scale_leaky_relu(float* __restrict__ y, const float* __restrict__ bias,
                                      long rows, long cols, float multiplier, float negative_slope) {
    long n = rows * cols;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float v = (y[i] + bias[i % cols]) * multiplier;
        y[i] = v > 0.0f ? v : v * negative_slope;
    }
}

torch::Tensor gemm_epilogue(torch::Tensor y, torch::Tensor bias, double multiplier, double negative_slope) {
    TORCH_CHECK(y.is_cuda() && y.scalar_type() == torch::kFloat && y.is_contiguous() && y.dim() == 2,
                "gemm_epilogue: contiguous 2-D float32 CUDA tensor expected");
    TORCH_CHECK(bias.numel() == y.size(1), "gemm_epilogue: one bias per column");
    auto b = bias.contiguous();
    long n = y.numel();
    if (n > 0) {
        long blocks = std::min<long>((n + 255) / 256, 65535L * 8);
        bias_scale_leaky_relu<<<blocks, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), y.size(0), y.size(1),
                                               (float)multiplier, (float)negative_slope);
    }
    return y;
}
"""

epilogue_ext = load_inline(
    name="dice_control_gemm_leaky_correct",
    cpp_sources="torch::Tensor gemm_epilogue(torch::Tensor y, torch::Tensor bias, double multiplier, double negative_slope);",
    cuda_sources=epilogue_cuda,
    functions=["gemm_epilogue"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)  # same name as Model's: same weights
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = torch.mm(x.contiguous(), self.gemm.weight.t())
        return epilogue_ext.gemm_epilogue(y, self.gemm.bias, self.multiplier, self.negative_slope)
