"""Kernel documents for the GPU tests: one baseline and candidates that are right, wrong, or
cheat in one known way each. Every candidate is a whole document (as judge() takes them):
the baseline with its kernel body replaced.
"""

from __future__ import annotations

SPEC = """\
// dice: let n = 1 << 24
// dice: buffer x[n], y[n]
// dice: launch grid=(n + 255) / 256, block=256
"""

# y = x * x, but thread i handles element j = i * 2654435761 mod n (a bijection: the
# multiplier is odd and n a power of two): neighbouring threads touch addresses far apart,
# every 4-byte access costs a 32-byte sector, and 128 MB do not fit in L2. The coalesced
# rewrite is several times faster.
BASELINE = SPEC + """\
__global__ void square(const float* __restrict__ x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = (int)(((unsigned long long)i * 2654435761ull) & (unsigned long long)(n - 1));
        y[j] = x[j] * x[j];
    }
}
"""


def with_body(body: str, prelude: str = "") -> str:
    return prelude + SPEC + (
        "__global__ void square(const float* __restrict__ x, float* y, int n)\n{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n" + body + "}\n"
    )


FASTER = with_body("    if (i < n) y[i] = x[i] * x[i];\n")
WRONG = with_body("    if (i < n) y[i] = x[i] * fabsf(x[i]);\n")  # right for x >= 0 only
WRITES_NOTHING = with_body("")
WRITES_HALF = with_body("    if (i < n / 2) y[i] = x[i] * x[i];\n")
# Saves its first result in device memory and replays it once a whole launch has finished.
CACHES_FIRST_RESULT = with_body(
    "    if (i >= n) return;\n"
    "    if (finished_blocks >= gridDim.x) { y[i] = saved[i]; return; }\n"
    "    float v = x[i] * x[i];\n"
    "    y[i] = v;\n"
    "    saved[i] = v;\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) atomicAdd(&finished_blocks, 1u);\n",
    prelude="__device__ float saved[1 << 24];\n__device__ unsigned int finished_blocks = 0;\n",
)
# Squares in half precision: about 3 decimal digits, far past fp32's tolerance.
LOWER_PRECISION = with_body(
    "    if (i < n) { __half h = __float2half(x[i]); y[i] = __half2float(__hmul(h, h)); }\n",
    prelude="#include <cuda_fp16.h>\n",
)
# Writes 256 GB past the end of y: unmapped memory, an illegal address.
ILLEGAL_ADDRESS = with_body("    if (i < n) y[i + (long long)n * 4096] = x[i];\n")
INFINITE_LOOP = with_body("    while (clock64() >= 0) { }\n    if (i < n) y[i] = x[i] * x[i];\n")
CHANGED_SIGNATURE = FASTER.replace("int n)", "long long n)")
# Right in y, and writes into its const input: one element, the last (the byte comparison
# of inputs must reach the end of the buffer), by the one thread that reads it, after its read.
WRITES_CONST_INPUT = with_body("    if (i < n) y[i] = x[i] * x[i];\n"
                               "    if (i == n - 1) ((float*)x)[i] = 0.5f;\n")
