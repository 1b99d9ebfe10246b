// y = a * x + y over 16M floats: the hello world of memory-bound kernels.
// Try: dice fill examples/saxpy.cu --range 12:9-12:32
// dice: let n = 1 << 24
// dice: let a = 2.5
// dice: buffer x[n], y[n]
// dice: inout y
// dice: launch grid=(n + 255) / 256, block=256
__global__ void saxpy(float a, const float* __restrict__ x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
