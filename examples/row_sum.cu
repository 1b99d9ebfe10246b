// Sum each row of a rows x cols matrix: one block per row, a shared-memory tree reduction.
// "Optimize this kernel" is worth trying here: warp shuffles beat the shared-memory tree.
// dice: let rows = 4096
// dice: let cols = 4096
// dice: buffer m[rows * cols], out[rows]
// dice: launch grid=rows, block=256, shared=256 * 4
__global__ void row_sum(const float* __restrict__ m, float* out, int rows, int cols)
{
    extern __shared__ float partial[];
    int row = blockIdx.x;
    float acc = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        acc += m[(size_t)row * cols + c];
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[row] = partial[0];
    }
}
