"""The projections of a decoding step: a few rows times a large weight, on tensor cores.

A denoising step of block diffusion runs 8 token rows at batch 1 (the block and the one
before it) through every projection: y [M, N] = x [M, K] @ W [N, K]^T with M = 8 to 64 and
W read once from memory, so the step is bound by reading the weights. cuBLAS runs these at
1.4 to 3.2 TB/s on the H200 (docs/benchmarks.md), 1.56x the floor for the
projections alone. This is the engine's own kernel for them, in CUDA through CuPy (NVRTC
compiles it in a second on first use, no toolkit needed):

- one thread block per 16 output features (rows of W), its warps splitting K; each warp
  streams its part of the 16 rows once (16-byte loads, several in flight, not kept in L1)
  against all of x's rows, on `mma.sync.m16n8k16` (W's 16 rows are the A operand, 8 token
  rows of x the B operand: no padding at batch 1);
- the order of k inside a 16-wide MMA step is permuted so that each thread's 16-byte load of
  W and its 16-byte load of x hold matching k (a dot product does not care about the order);
- the warps' partial sums are added in shared memory, in a fixed order (deterministic), and
  rounded once to bf16/fp16 (round to nearest even), as cuBLAS rounds its fp32 sums.

Two more forms serve a fused batch-1 step (engine.model.routes.Fusion.norms):
`residual_linear` adds the residual stream in the epilogue and writes each row's sum of squares
over each block's 16 features; `norm_linear` applies RMSNorm to its input from those sums (the
norm's weight multiplied in as x is loaded, 1 / rms applied to the fp32 sums), so the norm
needs no kernel of its own.

`linear(x, weight)` is a torch custom op (`dice::skinny_linear`) so that torch.compile keeps
it whole inside a compiled model and a CUDA graph captures its launch; `usable(x, weight)`
says when it applies (CUDA, bf16 or fp16, at most MAX_ROWS rows, shapes and alignment it
handles; a shape measured slower than cuBLAS is left to cuBLAS (None in TUNED), a shape not
measured takes the kernel with DEFAULT_CONFIG, the best or near it on every measured shape). The engine's `skinny`
path uses it in its steps (engine.decoding.paths); fp32 models and every other path keep F.linear.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import NamedTuple

import torch

MAX_ROWS = 8  # a batch-1 step's window (two blocks of 4); the kernel takes up to 64 (KERNEL_ROWS)
KERNEL_ROWS = 64  # 8 tiles of 8 token rows
ROWS_PER_BLOCK = 16  # output features per thread block: the MMA's A tile

SOURCE = r"""
typedef unsigned short u16;

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

__device__ __forceinline__ uint4 load_cached(const uint4* p) {
    uint4 r;
    asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

template <bool BF16>
__device__ __forceinline__ void mma(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                    unsigned b0, unsigned b1) {
    if (BF16) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
}

template <bool BF16>
__device__ __forceinline__ u16 round_to(float f) {
    u16 h;
    if (BF16) asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    else asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

template <bool BF16>
__device__ __forceinline__ float to_float(u16 h) {
    float r;
    if (BF16) r = __uint_as_float((unsigned)h << 16);
    else asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
    return r;
}

template <bool BF16>
__device__ __forceinline__ float rounded(float f) {
    return to_float<BF16>(round_to<BF16>(f));
}

// silu(gate) * up of two fp32 sums, each rounded first as the product's output would be (and
// the result once, as torch.compile's fused kernel for F.silu(gate) * up rounds it).
template <bool BF16>
__device__ __forceinline__ u16 glu(float gate, float up) {
    const float a = rounded<BF16>(gate), b = rounded<BF16>(up);
    return round_to<BF16>(a / (1.f + expf(-a)) * b);
}

// Two packed values times two packed weights, each product rounded to the dtype (one
// instruction: a*b + -0 is a*b exactly).
template <bool BF16>
__device__ __forceinline__ unsigned mul2(unsigned a, unsigned b) {
    unsigned r;
    if (BF16) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
    else asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

template <bool BF16>
__device__ __forceinline__ uint4 mul8(uint4 a, uint4 b) {
    return make_uint4(mul2<BF16>(a.x, b.x), mul2<BF16>(a.y, b.y), mul2<BF16>(a.z, b.z), mul2<BF16>(a.w, b.w));
}

// y[M, N] = x[M, K] @ w[N, K]^T. Grid: N / 16 blocks of WARPS warps; NT tiles of 8 rows of x
// (M <= 8 * NT); K % (32 * U * WARPS) == 0; rows of x and w 16-byte aligned.
// GLU: w is [gate; up] (N = 2 I) and y [M, I] = silu(x @ gate^T) * (x @ up^T); a block takes 8
// gate rows as the MMA's low 8 rows and the same 8 up rows as its high 8 (grid: I / 8 blocks).
// NORM: x is the residual stream h, and the product is RMSNorm(h) @ w^T: row r's sum of squares
// is the sum of part[p * ldp + r] over p < P (what a RES kernel wrote); each value of x is
// multiplied by nw (the norm's weight [K]) as it is loaded (rounded to the dtype, one packed
// instruction per two values) and each row's sums by its 1 / rms before they are rounded. (The
// model rounds h / rms, then nw times that: the same sum, rounded once instead of twice.)
// RES: y = res + x @ w^T (rounded as torch adds two tensors of the dtype), and the block writes
// its 16 features' sum of squares of y for each row to part_out[blockIdx.x * M + row].
template <int NT, int WARPS, int U, bool BF16, bool GLU, bool NORM, bool RES>
__global__ void __launch_bounds__(WARPS * 32)
skinny(const u16* __restrict__ w, const u16* __restrict__ x, u16* __restrict__ y,
       int M, int N, int K, int ldx, int ldy,
       const float* __restrict__ part, int P, int ldp, const u16* __restrict__ nw, float eps,
       const u16* __restrict__ res, int ldr, float* __restrict__ part_out) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3;
    const int row0 = GLU ? blockIdx.x * 8 : blockIdx.x * 16;
    const int chunk = K / WARPS;
    const int begin = warp * chunk + q * 8;
    const uint4* lo = reinterpret_cast<const uint4*>(w + (size_t)(row0 + g) * K + begin);
    const uint4* hi = reinterpret_cast<const uint4*>(w + (size_t)(row0 + g + (GLU ? N / 2 : 8)) * K + begin);
    const uint4* xs[NT];
    bool live[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        live[t] = t * 8 + g < M;
        xs[t] = reinterpret_cast<const uint4*>(x + (size_t)(live[t] ? t * 8 + g : 0) * ldx + begin);
    }
    float acc[NT][4];
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[t][r] = 0.f;

    uint4 a[U], b[U];
    // (The first weights are loaded before the norm's sums are fetched.)
#pragma unroll
    for (int u = 0; u < U; ++u) {
        a[u] = load_stream(lo + 4 * u);
        b[u] = load_stream(hi + 4 * u);
    }
    // NORM: each warp's row of partial sums is fetched now and added after the loop (its 1 / rms
    // is needed only by the epilogue), where a warp has a row and the lane's share fits PRE.
    constexpr int PRE = 8;
    const bool early = NORM && NT * 8 <= WARPS && P <= 32 * PRE;
    float pre[PRE];
#pragma unroll
    for (int i = 0; i < PRE; ++i)
        pre[i] = early && warp < M && lane + 32 * i < P ? part[(size_t)(lane + 32 * i) * ldp + warp] : 0.f;
    const uint4* nws = reinterpret_cast<const uint4*>(nw + begin);

    for (int k = 0; k < chunk; k += 32 * U) {
        uint4 v[U][NT];
        if (k) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                a[u] = load_stream(lo + (k + 32 * u) / 8);
                b[u] = load_stream(hi + (k + 32 * u) / 8);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int t = 0; t < NT; ++t)
                v[u][t] = live[t] ? load_cached(xs[t] + (k + 32 * u) / 8) : make_uint4(0, 0, 0, 0);
        if (NORM) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const uint4 s = load_cached(nws + (k + 32 * u) / 8);
#pragma unroll
                for (int t = 0; t < NT; ++t) v[u][t] = mul8<BF16>(v[u][t], s);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                mma<BF16>(acc[t], a[u].x, b[u].x, a[u].y, b[u].y, v[u][t].x, v[u][t].y);
                mma<BF16>(acc[t], a[u].z, b[u].z, a[u].w, b[u].w, v[u][t].z, v[u][t].w);
            }
    }

    __shared__ float scales[NORM ? NT * 8 : 1];
    if (NORM) {
        // 1 / rms of each row: its partial sums added in a fixed order (deterministic).
        for (int r = warp; r < NT * 8; r += WARPS) {
            float s = 0.f;
            if (early) {
#pragma unroll
                for (int i = 0; i < PRE; ++i) s += pre[i];
            } else if (r < M) {
                for (int p = lane; p < P; p += 32) s += part[(size_t)p * ldp + r];
            }
#pragma unroll
            for (int d = 16; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
            if (lane == 0) scales[r] = rsqrtf(s / K + eps);
        }
        __syncthreads();
    }

    // acc[t][r]: feature row0 + g + 8 * (r >= 2), token t * 8 + 2 * q + (r & 1) (GLU: r < 2 the
    // gate's, r >= 2 the up's of feature row0 + g).
    __shared__ float squares[RES ? NT * 8 : 1][16];
    // y at (token, row0 + f) from its fp32 sum (RES: plus the residual, its square kept).
    auto store = [&](int token, int f, float sum) {
        u16 out = round_to<BF16>(NORM ? sum * scales[token] : sum);
        if (RES) {
            out = round_to<BF16>(to_float<BF16>(res[(size_t)token * ldr + row0 + f]) + to_float<BF16>(out));
            const float o = to_float<BF16>(out);
            squares[token][f] = o * o;
        }
        y[(size_t)token * ldy + row0 + f] = out;
    };
    if (WARPS == 1) {
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int token = t * 8 + 2 * q + (r & 1);
                if (GLU) {
                    const float sc = NORM && token < M ? scales[token] : 1.f;
                    if (r < 2 && token < M) y[(size_t)token * ldy + row0 + g] = glu<BF16>(acc[t][r] * sc, acc[t][r + 2] * sc);
                } else if (token < M) {
                    store(token, g + 8 * (r >> 1), acc[t][r]);
                }
            }
    } else {
        __shared__ float partial[WARPS][NT * 4][32];
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int r = 0; r < 4; ++r) partial[warp][t * 4 + r][lane] = acc[t][r];
        __syncthreads();
        if (GLU) {
            for (int e = threadIdx.x; e < NT * 2 * 32; e += WARPS * 32) {
                const int l = e & 31, r = (e >> 5) & 1, t = e >> 6, reg = t * 4 + r;
                const int token = t * 8 + 2 * (l & 3) + r;
                float gate = 0.f, up = 0.f;
#pragma unroll
                for (int s = 0; s < WARPS; ++s) {
                    gate += partial[s][reg][l];
                    up += partial[s][reg + 2][l];
                }
                if (token < M) {
                    const float sc = NORM ? scales[token] : 1.f;
                    y[(size_t)token * ldy + row0 + (l >> 2)] = glu<BF16>(gate * sc, up * sc);
                }
            }
            return;
        }
        for (int e = threadIdx.x; e < NT * 4 * 32; e += WARPS * 32) {
            const int reg = e >> 5, l = e & 31, t = reg >> 2, r = reg & 3;
            const int token = t * 8 + 2 * (l & 3) + (r & 1);
            float sum = 0.f;
#pragma unroll
            for (int s = 0; s < WARPS; ++s) sum += partial[s][reg][l];
            if (token < M) store(token, (l >> 2) + 8 * (r >> 1), sum);
        }
    }
    if (RES) {
        // Each row's sum of squares over this block's 16 features, in a fixed order.
        __syncthreads();
        for (int token = threadIdx.x; token < M; token += WARPS * 32) {
            float s = 0.f;
#pragma unroll
            for (int f = 0; f < 16; ++f) s += squares[token][f];
            part_out[(size_t)blockIdx.x * M + token] = s;
        }
    }
}
"""

# Per (8-row tiles of x, N, K): (warps per block, 16-byte loads of each W row in flight per
# thread), or None where cuBLAS is faster. Measured on the H200 with
# benchmarks/decode_kernels.py (docs/benchmarks.md), DICE-1.7B's
# shapes at 8 rows (a batch-1 step), each alone: qkv 6.46 us against cuBLAS's 7.14, o 4.35
# against 6.15, down 10.66 against 11.53, the vocabulary 142.8 against 152.2; gate_up 16.02
# against 15.62, but in the step the kernel takes gate_up as fast as cuBLAS does (0.44 ms a
# step either way) and the step was 1.885 ms with it against 1.984 without (inductor fuses
# the step's RMSNorm/RoPE kernels better around the custom op), so it takes gate_up too. At
# 64 rows (batch 8) cuBLAS was 1.3x to 2.5x faster on every shape, so the engine gives the
# kernel at most MAX_ROWS rows. Another shape takes DEFAULT_CONFIG (the best or near it on
# all five), cut to what divides its K. `use_tuned(read_tuned(path))` replaces the table with
# a JSON file of the same ({"tiles,n,k": [warps, unroll] or null}, what
# benchmarks/decode_kernels.py writes): how a benchmark tries a new tuning before it is written here.
DEFAULT_CONFIG = (16, 4)
TUNED: dict[tuple[int, int, int], tuple[int, int] | None] = {
    (1, 4096, 2048): (16, 2),
    (1, 2048, 2048): (16, 4),
    (1, 12288, 2048): (16, 4),
    (1, 2048, 6144): (16, 4),
    (1, 151936, 2048): (16, 4),
}
# The table in use: set outside the model's forward, as usable() runs inside torch.compile's
# trace, which cannot read a file.
_tuned_table: dict | None = None


def read_tuned(path: str | Path) -> dict:
    """A tuning table from a JSON file in benchmarks/decode_kernels.py's format."""
    table = json.loads(Path(path).read_text())
    return {tuple(int(v) for v in key.split(",")): None if value is None else tuple(value)
            for key, value in table.items()}


def use_tuned(table: dict | None) -> None:
    """Tile choices per (tiles, n, k) in place of TUNED (None: TUNED again)."""
    global _tuned_table
    _tuned_table = table


def _tuned() -> dict:
    return TUNED if _tuned_table is None else _tuned_table


def faster_than_cublas(m: int, n: int, k: int) -> bool:
    return _tuned().get((_tiles(m), n, k), DEFAULT_CONFIG) is not None


def config_for(m: int, n: int, k: int) -> tuple[int, int]:
    tiles = _tiles(m)
    warps, unroll = _tuned().get((tiles, n, k)) or DEFAULT_CONFIG
    while warps > 1 and not fits(tiles, warps):
        warps //= 2
    # Fewer loads in flight before fewer warps: a lone warp streaming all of K is the slowest.
    while k % (32 * unroll * warps):
        if unroll > 1:
            unroll //= 2
        else:
            warps //= 2
    return warps, unroll


def _tiles(m: int) -> int:
    return 1 if m <= 8 else 2 if m <= 16 else 4 if m <= 32 else 8


def kernel_name(tiles: int, warps: int, unroll: int, bf16: bool, glu: bool = False, norm: bool = False,
                residual: bool = False) -> str:
    flags = ", ".join("true" if f else "false" for f in (bf16, glu, norm, residual))
    return f"skinny<{tiles}, {warps}, {unroll}, {flags}>"


def fits(tiles: int, warps: int) -> bool:
    """A block of at most 1024 threads whose partial sums fit 48 KB of static shared memory."""
    return warps <= 32 and tiles * warps <= 64


def takes(tiles: int, k: int, warps: int, unroll: int) -> bool:
    """Whether that tile choice runs a product of this K and this many 8-row tiles: every warp's
    share of K a whole number of steps of 32 x unroll, and the block fits."""
    return k % (32 * unroll * warps) == 0 and fits(tiles, warps)


@functools.cache
def _function(name: str, device: int):
    """One instantiation, compiled by NVRTC on first use (~0.3 s; CuPy caches it on disk) and
    loaded on `device` (a module belongs to one device's context); call it with that device
    current."""
    import cupy

    return cupy.RawModule(code=SOURCE, options=("--std=c++17",), name_expressions=[name]).get_function(name)


def available() -> str | None:
    """Why the kernel cannot run here (None: it can)."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "the skinny projection kernel needs CuPy (pip install 'dice-lsp[gpu]')"
    if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0):
        return "the skinny projection kernel needs a GPU of compute capability 8.0 or newer (bf16 MMA)"
    return None


def usable(x: torch.Tensor, weight: torch.Tensor, glu: bool = False) -> bool:
    """Whether `linear` (`glu`: `glu_linear`) takes this product (else F.linear does)."""
    k = weight.shape[-1]
    # (no data_ptr() here: torch.compile traces this; launch checks the weight's alignment)
    return x.is_cuda and x.shape[-1] == k and takes_rows(x.numel() // k if k else 0, x.dtype, weight, glu)


def takes_rows(m: int, dtype: torch.dtype, weight: torch.Tensor, glu: bool = False) -> bool:
    """Whether the kernel takes m rows of `dtype` times this weight (see usable)."""
    if not (weight.is_cuda and dtype == weight.dtype and dtype in (torch.bfloat16, torch.float16)):
        return False
    n, k = weight.shape
    return (0 < m <= MAX_ROWS and n % (2 * ROWS_PER_BLOCK if glu else ROWS_PER_BLOCK) == 0 and k % 32 == 0
            and weight.is_contiguous() and faster_than_cublas(m, n, k))


class Norm(NamedTuple):
    """RMSNorm applied by the kernel to its input x (the residual stream h) as it reads it:
    `part` [P, rows] holds each row's sum of squares in P parts (what a `residual` launch
    writes; a [1, rows] tensor of whole sums does too), `weight` [K] is the norm's weight (x's
    dtype) and `eps` its epsilon."""

    part: torch.Tensor
    weight: torch.Tensor
    eps: float


def launch(x: torch.Tensor, weight: torch.Tensor, warps: int | None = None, unroll: int | None = None,
           glu: bool = False, norm: Norm | None = None, residual: torch.Tensor | None = None):
    """y = x @ weight^T for x [..., K] of at most KERNEL_ROWS rows (N a multiple of 16, K of
    32); `glu`: weight is [gate; up] (N a multiple of 32) and y = silu(x @ gate^T) * (x @ up^T),
    [..., N / 2]; `norm`: the product is RMSNorm(x) @ weight^T (see Norm); `residual` (x's rows
    by N, not with glu): returns (residual + x @ weight^T, part), part [N / 16, rows] the sums of
    squares of the result's rows over each 16 features (a later launch's Norm.part).
    `warps`/`unroll` override the tuned choice (benchmarks/decode_kernels.py)."""
    n, k = weight.shape
    if x.shape[-1] != k:
        raise ValueError(f"x's last dimension {x.shape[-1]} is not the weight's K = {k}")
    if x.dtype != weight.dtype or x.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"the skinny kernel takes bf16 or fp16 of one dtype, not {x.dtype} x {weight.dtype}")
    step = 2 * ROWS_PER_BLOCK if glu else ROWS_PER_BLOCK
    if n % step or k % 32 or not weight.is_contiguous():
        raise ValueError(f"the skinny kernel takes a contiguous weight of N % {step} == 0, K % 32 == 0, not {n} x {k}")
    m = x.numel() // k
    if not 0 < m <= KERNEL_ROWS:
        raise ValueError(f"the skinny kernel takes 1 to {KERNEL_ROWS} rows, not {m}")
    if warps is None or unroll is None:
        warps, unroll = config_for(m, n, k)
    elif not takes(_tiles(m), k, warps, unroll):
        raise ValueError(f"{warps} warps of {unroll} loads do not divide K = {k} or do not fit {m} rows")
    if not (x.is_cuda and weight.is_cuda and x.device == weight.device):
        raise ValueError(f"the skinny kernel takes tensors on one CUDA device, not {x.device} and {weight.device}")
    if weight.data_ptr() % 16:
        raise ValueError("the skinny kernel reads the weight in 16-byte loads: it must start 16-byte aligned")
    rows = x.reshape(-1, k)
    if rows.stride(-1) != 1 or rows.stride(0) % 8 or rows.data_ptr() % 16:
        rows = rows.contiguous()
    import cupy
    import numpy as np

    out = n // 2 if glu else n
    y = torch.empty(m, out, device=x.device, dtype=x.dtype)
    part = nw = res = part_out = None
    eps, ldp, ldr = 0.0, 0, 0
    if norm is not None:
        part, nw, eps = norm
        if (part.dtype != torch.float32 or part.dim() != 2 or part.shape[1] != m or (m > 1 and part.stride(1) != 1)
                or part.device != x.device):
            raise ValueError(f"a norm's sums of squares are fp32 [parts, {m} rows] on x's device with unit stride "
                             f"along rows, not {part.dtype} {tuple(part.shape)} on {part.device}")
        nw = nw.contiguous()
        if nw.shape != (k,) or nw.dtype != x.dtype or nw.device != x.device or nw.data_ptr() % 16:
            raise ValueError(f"a norm's weight is [{k}] of {x.dtype}, 16-byte aligned (read in 16-byte loads), "
                             f"not {nw.dtype} {tuple(nw.shape)}")
        ldp = part.stride(0)
    if residual is not None:
        if glu:
            raise ValueError("the skinny kernel adds a residual to a plain product, not to the SwiGLU form")
        res = residual.reshape(-1, n)
        if res.shape[0] != m or res.dtype != x.dtype or res.stride(-1) != 1 or res.device != x.device:
            raise ValueError(f"the residual is [{m}, {n}] of {x.dtype}, not {res.dtype} {tuple(residual.shape)}")
        ldr = res.stride(0)
        part_out = torch.empty(n // ROWS_PER_BLOCK, m, device=x.device, dtype=torch.float32)
    null = np.uint64(0)
    with cupy.cuda.Device(x.device.index), _stream(torch.cuda.current_stream(x.device).cuda_stream):
        kernel = _function(kernel_name(_tiles(m), warps, unroll, x.dtype == torch.bfloat16, glu, norm is not None,
                                       residual is not None), x.device.index)
        kernel((n // ROWS_PER_BLOCK,), (32 * warps,),
               (np.uint64(weight.data_ptr()), np.uint64(rows.data_ptr()), np.uint64(y.data_ptr()),
                np.int32(m), np.int32(n), np.int32(k), np.int32(rows.stride(0)), np.int32(out),
                null if part is None else np.uint64(part.data_ptr()), np.int32(0 if part is None else part.shape[0]),
                np.int32(ldp), null if nw is None else np.uint64(nw.data_ptr()), np.float32(eps),
                null if res is None else np.uint64(res.data_ptr()), np.int32(ldr),
                null if part_out is None else np.uint64(part_out.data_ptr())))
    y = y.view(*x.shape[:-1], out)
    return y if residual is None else (y, part_out)


@functools.lru_cache(maxsize=64)
def _stream(pointer: int):
    """CuPy's handle on torch's stream (the one a CUDA graph is capturing, in a step)."""
    import cupy

    try:
        return cupy.cuda.Stream.from_external(_Pointer(pointer))
    except (AttributeError, TypeError):  # CuPy < 14
        return cupy.cuda.ExternalStream(pointer)


class _Pointer:
    """A stream as the CUDA stream protocol hands it over (CuPy >= 14's Stream.from_external)."""

    def __init__(self, pointer: int):
        self.pointer = pointer

    def __cuda_stream__(self):
        return 0, self.pointer


@torch.library.custom_op("dice::skinny_linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x [..., K] @ weight [N, K]^T on the skinny kernel; usable(x, weight) must hold."""
    return launch(x, weight)


@linear.register_fake
def _(x, weight):
    return x.new_empty(*x.shape[:-1], weight.shape[0])


@torch.library.custom_op("dice::skinny_glu", mutates_args=())
def glu_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """silu(x @ gate^T) * (x @ up^T) for weight = [gate; up] [2 I, K], x [..., K] -> [..., I],
    on the skinny kernel (SwiGLU's first half and its activation in one kernel);
    usable(x, weight, glu=True) must hold."""
    return launch(x, weight, glu=True)


@glu_linear.register_fake
def _(x, weight):
    return x.new_empty(*x.shape[:-1], weight.shape[0] // 2)


@torch.library.custom_op("dice::skinny_norm_linear", mutates_args=())
def norm_linear(h: torch.Tensor, part: torch.Tensor, norm_weight: torch.Tensor, weight: torch.Tensor, eps: float,
                glu: bool = False) -> torch.Tensor:
    """RMSNorm(h) @ weight^T (`glu`: its SwiGLU form) with the norm applied as the kernel reads
    h: part [P, rows] the rows' sums of squares in parts (see Norm); one kernel where the step
    ran the norm and the product; norm_usable(...) must hold."""
    return launch(h, weight, glu=glu, norm=Norm(part, norm_weight, eps))


@norm_linear.register_fake
def _(h, part, norm_weight, weight, eps, glu=False):
    return h.new_empty(*h.shape[:-1], weight.shape[0] // 2 if glu else weight.shape[0])


@torch.library.custom_op("dice::skinny_residual_linear", mutates_args=())
def residual_linear(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(residual + x @ weight^T, part): the product and the residual add in one kernel, with the
    result's sums of squares in N / 16 parts for the next norm_linear; usable(x, weight) must hold."""
    return launch(x, weight, residual=residual)


@residual_linear.register_fake
def _(x, weight, residual):
    m = x.numel() // x.shape[-1]
    return x.new_empty(*x.shape[:-1], weight.shape[0]), x.new_empty(weight.shape[0] // ROWS_PER_BLOCK, m,
                                                                    dtype=torch.float32)
