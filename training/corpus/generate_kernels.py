"""Generate small, varied, compilable CUDA kernels with `// dice:` benchmark specs.

Part of the built-in model's corpus (training/corpus/build_corpus.py). The permissively licensed
CUDA on PyPI is mostly template-heavy library code (CUTLASS, CUB); the kernels users write
and select in the editor look like these instead: elementwise maps, reductions, stencils,
transposes, tiled matrix products, each with the benchmark spec of DESIGN.md. Names,
types, indexing styles and block sizes vary so that the model learns the patterns rather
than one spelling. Output is deterministic for a given seed.

    python -m training.corpus.generate_kernels OUT_DIR [--count N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Style:
    """The spelling choices one generated file uses throughout."""

    index: str          # name of the global element index
    block: int          # threads per block
    restrict: bool      # mark inputs `const T* __restrict__`
    grid_stride: bool   # grid-stride loop instead of one element per thread
    brace_newline: bool # function brace on its own line
    n_name: str         # name of the element count


# Elementwise expressions of one input `v` (float), as CUDA source.
UNARY = {
    "relu": "fmaxf(v, 0.0f)",
    "leaky_relu": "v > 0.0f ? v : 0.01f * v",
    "sigmoid": "1.0f / (1.0f + expf(-v))",
    "tanh_act": "tanhf(v)",
    "gelu": "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))",
    "softplus": "logf(1.0f + expf(v))",
    "silu": "v / (1.0f + expf(-v))",
    "square": "v * v",
    "abs_val": "fabsf(v)",
    "exp_val": "expf(v)",
    "clamp_unit": "fminf(fmaxf(v, -1.0f), 1.0f)",
    "hardtanh": "fminf(fmaxf(v, -1.0f), 1.0f)",
    "elu": "v > 0.0f ? v : expf(v) - 1.0f",
    "selu": "1.0507f * (v > 0.0f ? v : 1.67326f * (expf(v) - 1.0f))",
    "negate": "-v",
    "reciprocal": "1.0f / (v + 1e-6f)",
    "rsqrt_abs": "rsqrtf(fabsf(v) + 1e-6f)",
    "hardsigmoid": "fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f)",
    "mish": "v * tanhf(logf(1.0f + expf(v)))",
    "swish_beta": "v * (1.0f / (1.0f + expf(-1.702f * v)))",
}

# Elementwise expressions of two inputs, `{a}` and `{b}` placeholders.
BINARY = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div_safe": "{a} / ({b} + 1e-6f)",
    "maximum": "fmaxf({a}, {b})",
    "minimum": "fminf({a}, {b})",
    "squared_diff": "({a} - {b}) * ({a} - {b})",
    "hypot_ab": "sqrtf({a} * {a} + {b} * {b})",
    "lerp_half": "{a} + 0.5f * ({b} - {a})",
    "mul_add_one": "{a} * {b} + 1.0f",
}

KERNEL_NAME = re.compile(r"__global__ void (\w+)")
INDEX_NAMES = ["i", "idx", "tid", "gid", "k"]
COUNT_NAMES = ["n", "count", "size", "len", "num"]


def _header(rng: random.Random, summary: str) -> str:
    return f"// {summary}\n" if rng.random() < 0.7 else ""


def _open(style: Style, signature: str) -> str:
    return f"{signature}\n{{\n" if style.brace_newline else f"{signature} {{\n"


def _ptr(style: Style, name: str) -> str:
    return f"const float* __restrict__ {name}" if style.restrict else f"const float* {name}"


def _loop(style: Style, body: list[str]) -> list[str]:
    """One element per thread, or a grid-stride loop, around `body` lines."""
    i, n = style.index, style.n_name
    if style.grid_stride:
        head = [
            f"    for (int {i} = blockIdx.x * blockDim.x + threadIdx.x; {i} < {n};",
            f"         {i} += blockDim.x * gridDim.x) {{",
        ]
        return head + [f"        {line}" for line in body] + ["    }"]
    return [
        f"    int {i} = blockIdx.x * blockDim.x + threadIdx.x;",
        f"    if ({i} < {n}) {{",
        *[f"        {line}" for line in body],
        "    }",
    ]


def _launch_1d(style: Style, elems: str) -> str:
    b = style.block
    return f"// dice: launch grid=({elems} + {b - 1}) / {b}, block={b}\n"


def unary_kernel(rng: random.Random, style: Style) -> str:
    op = rng.choice(list(UNARY))
    n, i = style.n_name, style.index
    name = rng.choice([op, f"{op}_kernel", f"apply_{op}"])
    out = rng.choice(["y", "out", "dst"])
    inp = rng.choice(["x", "in", "src"])
    size = rng.choice(["1 << 20", "1 << 22", "1 << 24", "4096 * 1024", "1000000"])
    spec = (
        f"// dice: let {n} = {size}\n// dice: buffer {inp}[{n}], {out}[{n}]\n"
        + _launch_1d(style, n)
    )
    body = [f"float v = {inp}[{i}];", f"{out}[{i}] = {UNARY[op]};"]
    sig = f"__global__ void {name}({_ptr(style, inp)}, float* {out}, int {n})"
    return (
        _header(rng, f"{out} = {op}({inp}), elementwise over {n} floats.")
        + spec + _open(style, sig) + "\n".join(_loop(style, body)) + "\n}\n"
    )


def binary_kernel(rng: random.Random, style: Style) -> str:
    op = rng.choice(list(BINARY))
    n, i = style.n_name, style.index
    name = rng.choice([f"{op}", f"elementwise_{op}", f"{op}_f32"])
    a, b, out = rng.choice([("a", "b", "c"), ("x", "y", "z"), ("lhs", "rhs", "out")])
    size = rng.choice(["1 << 20", "1 << 23", "1 << 24", "3000000"])
    spec = (
        f"// dice: let {n} = {size}\n// dice: buffer {a}[{n}], {b}[{n}], {out}[{n}]\n"
        + _launch_1d(style, n)
    )
    expr = BINARY[op].format(a=f"{a}[{i}]", b=f"{b}[{i}]")
    body = [f"{out}[{i}] = {expr};"]
    sig = (
        f"__global__ void {name}({_ptr(style, a)}, {_ptr(style, b)}, float* {out}, int {n})"
    )
    return (
        _header(rng, f"{out} = {op}({a}, {b}) elementwise.")
        + spec + _open(style, sig) + "\n".join(_loop(style, body)) + "\n}\n"
    )


def axpby_kernel(rng: random.Random, style: Style) -> str:
    n, i = style.n_name, style.index
    alpha, beta = rng.choice([("a", "b"), ("alpha", "beta"), ("s", "t")])
    av, bv = rng.choice(["2.5", "0.5", "1.5", "-1.0"]), rng.choice(["1.0", "0.25", "3.0"])
    name = rng.choice(["axpby", "saxpby", "scaled_add", "blend"])
    spec = (
        f"// dice: let {n} = 1 << {rng.choice([20, 22, 24])}\n"
        f"// dice: let {alpha} = {av}\n// dice: let {beta} = {bv}\n"
        f"// dice: buffer x[{n}], y[{n}]\n// dice: inout y\n" + _launch_1d(style, n)
    )
    body = [f"y[{i}] = {alpha} * x[{i}] + {beta} * y[{i}];"]
    sig = (
        f"__global__ void {name}(float {alpha}, float {beta}, {_ptr(style, 'x')}, "
        f"float* y, int {n})"
    )
    return (
        _header(rng, f"y = {alpha} * x + {beta} * y.")
        + spec + _open(style, sig) + "\n".join(_loop(style, body)) + "\n}\n"
    )


def vectorized_kernel(rng: random.Random, style: Style) -> str:
    op = rng.choice(list(UNARY))
    n4, i = rng.choice(["n4", "count4", "quads"]), style.index
    name = f"{op}_vec4"
    expr = UNARY[op]
    # No CUDA function name used in UNARY contains the letter v, so every `v` is the input.
    lanes = "\n".join(f"        r.{c} = {expr.replace('v', f'v.{c}')};" for c in "xyzw")
    spec = (
        f"// dice: let {n4} = 1 << {rng.choice([18, 20, 22])}\n"
        f"// dice: buffer x[{n4} * 4], y[{n4} * 4]\n"
        + _launch_1d(style, n4)
    )
    sig = f"__global__ void {name}(const float4* __restrict__ x, float4* y, int {n4})"
    return (
        _header(rng, "Four floats per thread through float4 loads and stores.")
        + spec + _open(style, sig)
        + f"    int {i} = blockIdx.x * blockDim.x + threadIdx.x;\n"
        + f"    if ({i} < {n4}) {{\n        float4 v = x[{i}];\n        float4 r;\n"
        + lanes + f"\n        y[{i}] = r;\n    }}\n}}\n"
    )


def reduction_kernel(rng: random.Random, style: Style) -> str:
    n = style.n_name
    b = rng.choice([128, 256, 512])
    op, init, combine = rng.choice([
        ("sum", "0.0f", "{x} + {y}"),
        ("max", "-INFINITY", "fmaxf({x}, {y})"),
        ("min", "INFINITY", "fminf({x}, {y})"),
        ("sum_sq", "0.0f", "{x} + {y}"),
    ])
    load = "v * v" if op == "sum_sq" else "v"
    atomic = {"sum": "atomicAdd(out, partial[0]);", "sum_sq": "atomicAdd(out, partial[0]);"}
    final = atomic.get(op, "out[blockIdx.x] = partial[0];")
    outs = "out[1]" if op in atomic else f"out[({n} + {b - 1}) / {b}]"
    inout = "// dice: inout out\n" if op in atomic else ""
    spec = (
        f"// dice: let {n} = 1 << {rng.choice([20, 22, 24])}\n"
        f"// dice: buffer x[{n}], {outs}\n{inout}"
        f"// dice: launch grid=({n} + {b - 1}) / {b}, block={b}\n"
    )
    sig = f"__global__ void block_{op}({_ptr(style, 'x')}, float* out, int {n})"
    use_shuffle = rng.random() < 0.4
    lines = [
        f"    __shared__ float partial[{b}];",
        "    int tid = threadIdx.x;",
        "    int i = blockIdx.x * blockDim.x + tid;",
        f"    float v = i < {n} ? x[i] : {init};" if op != "sum_sq"
        else f"    float v = i < {n} ? x[i] : 0.0f;",
        f"    partial[tid] = {load};",
        "    __syncthreads();",
    ]
    if use_shuffle:
        lines += [
            "    for (int s = blockDim.x / 2; s >= 32; s >>= 1) {",
            "        if (tid < s) {",
            f"            partial[tid] = {combine.format(x='partial[tid]', y='partial[tid + s]')};",
            "        }",
            "        __syncthreads();",
            "    }",
            "    if (tid < 32) {",
            "        float w = partial[tid];",
            "        for (int off = 16; off > 0; off >>= 1) {",
            f"            w = {combine.format(x='w', y='__shfl_down_sync(0xffffffff, w, off)')};",
            "        }",
            "        if (tid == 0) {",
            "            partial[0] = w;",
            "        }",
            "    }",
            "    __syncthreads();",
        ]
    else:
        lines += [
            "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {",
            "        if (tid < s) {",
            f"            partial[tid] = {combine.format(x='partial[tid]', y='partial[tid + s]')};",
            "        }",
            "        __syncthreads();",
            "    }",
        ]
    lines += ["    if (tid == 0) {", f"        {final}", "    }"]
    return (
        _header(rng, f"Block-wide {op} reduction in shared memory"
                + (", finished with warp shuffles." if use_shuffle else "."))
        + spec + _open(style, sig) + "\n".join(lines) + "\n}\n"
    )


def row_kernel(rng: random.Random, style: Style) -> str:
    b = rng.choice([128, 256])
    rows, cols = rng.choice([("rows", "cols"), ("m", "n"), ("batch", "dim")])
    kind = rng.choice(["row_sum", "row_max", "row_mean", "softmax", "row_scale"])
    sizes = f"// dice: let {rows} = {rng.choice([1024, 2048, 4096])}\n// dice: let {cols} = {rng.choice([512, 1024, 4096])}\n"
    if kind == "softmax":
        spec = sizes + (
            f"// dice: buffer x[{rows} * {cols}], y[{rows} * {cols}]\n"
            f"// dice: launch grid={rows}, block={b}\n"
        )
        sig = f"__global__ void softmax_rows({_ptr(style, 'x')}, float* y, int {rows}, int {cols})"
        lines = [
            f"    __shared__ float red[{b}];",
            "    int row = blockIdx.x;",
            f"    const float* xr = x + (size_t)row * {cols};",
            f"    float* yr = y + (size_t)row * {cols};",
            "    float mx = -INFINITY;",
            f"    for (int c = threadIdx.x; c < {cols}; c += blockDim.x) {{",
            "        mx = fmaxf(mx, xr[c]);",
            "    }",
            "    red[threadIdx.x] = mx;",
            "    __syncthreads();",
            "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {",
            "        if (threadIdx.x < s) {",
            "            red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);",
            "        }",
            "        __syncthreads();",
            "    }",
            "    mx = red[0];",
            "    __syncthreads();",
            "    float sum = 0.0f;",
            f"    for (int c = threadIdx.x; c < {cols}; c += blockDim.x) {{",
            "        sum += expf(xr[c] - mx);",
            "    }",
            "    red[threadIdx.x] = sum;",
            "    __syncthreads();",
            "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {",
            "        if (threadIdx.x < s) {",
            "            red[threadIdx.x] += red[threadIdx.x + s];",
            "        }",
            "        __syncthreads();",
            "    }",
            "    sum = red[0];",
            f"    for (int c = threadIdx.x; c < {cols}; c += blockDim.x) {{",
            "        yr[c] = expf(xr[c] - mx) / sum;",
            "    }",
        ]
        summary = "Numerically stable softmax over each row: max, then sum of exponentials."
    elif kind == "row_scale":
        spec = sizes + (
            f"// dice: buffer x[{rows} * {cols}], scale[{rows}], y[{rows} * {cols}]\n"
            f"// dice: launch grid={rows}, block={b}\n"
        )
        sig = (f"__global__ void scale_rows({_ptr(style, 'x')}, {_ptr(style, 'scale')}, "
               f"float* y, int {rows}, int {cols})")
        lines = [
            "    int row = blockIdx.x;",
            "    float s = scale[row];",
            f"    for (int c = threadIdx.x; c < {cols}; c += blockDim.x) {{",
            f"        y[(size_t)row * {cols} + c] = s * x[(size_t)row * {cols} + c];",
            "    }",
        ]
        summary = "Multiply each row by its own scale factor."
    else:
        op = {"row_sum": ("0.0f", "acc + v", "a + b"), "row_max": ("-INFINITY", "fmaxf(acc, v)", "fmaxf(a, b)"),
              "row_mean": ("0.0f", "acc + v", "a + b")}[kind]
        init, step, comb = op
        spec = sizes + (
            f"// dice: buffer x[{rows} * {cols}], out[{rows}]\n"
            f"// dice: launch grid={rows}, block={b}, shared={b} * 4\n"
        )
        sig = f"__global__ void {kind}({_ptr(style, 'x')}, float* out, int {rows}, int {cols})"
        result = f"partial[0] / {cols}" if kind == "row_mean" else "partial[0]"
        lines = [
            "    extern __shared__ float partial[];",
            "    int row = blockIdx.x;",
            f"    float acc = {init};",
            f"    for (int c = threadIdx.x; c < {cols}; c += blockDim.x) {{",
            f"        float v = x[(size_t)row * {cols} + c];",
            f"        acc = {step};",
            "    }",
            "    partial[threadIdx.x] = acc;",
            "    __syncthreads();",
            "    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {",
            "        if (threadIdx.x < stride) {",
            "            float a = partial[threadIdx.x];",
            "            float b = partial[threadIdx.x + stride];",
            f"            partial[threadIdx.x] = {comb};",
            "        }",
            "        __syncthreads();",
            "    }",
            "    if (threadIdx.x == 0) {",
            f"        out[row] = {result};",
            "    }",
        ]
        summary = f"{kind.replace('_', ' ')} of a {rows} x {cols} matrix, one block per row."
    return _header(rng, summary) + spec + _open(style, sig) + "\n".join(lines) + "\n}\n"


def stencil_kernel(rng: random.Random, style: Style) -> str:
    if rng.random() < 0.5:
        n, i = style.n_name, style.index
        w0, w1 = rng.choice([("0.5f", "0.25f"), ("-2.0f", "1.0f"), ("0.6f", "0.2f")])
        spec = (f"// dice: let {n} = 1 << {rng.choice([20, 22, 24])}\n"
                f"// dice: buffer x[{n}], y[{n}]\n" + _launch_1d(style, n))
        sig = f"__global__ void stencil3({_ptr(style, 'x')}, float* y, int {n})"
        lines = [
            f"    int {i} = blockIdx.x * blockDim.x + threadIdx.x;",
            f"    if ({i} >= {n}) {{",
            "        return;",
            "    }",
            f"    float left = {i} > 0 ? x[{i} - 1] : 0.0f;",
            f"    float right = {i} + 1 < {n} ? x[{i} + 1] : 0.0f;",
            f"    y[{i}] = {w0} * x[{i}] + {w1} * (left + right);",
        ]
        return _header(rng, "Three-point stencil with zero boundaries.") + spec + _open(style, sig) + "\n".join(lines) + "\n}\n"
    w, h = rng.choice([("width", "height"), ("nx", "ny"), ("cols", "rows")])
    bx = rng.choice([16, 32])
    by = 256 // bx
    spec = (f"// dice: let {w} = {rng.choice([1024, 2048, 4096])}\n// dice: let {h} = {rng.choice([1024, 2048])}\n"
            f"// dice: buffer in[{w} * {h}], out[{w} * {h}]\n"
            f"// dice: launch grid=(({w} + {bx - 1}) / {bx}, ({h} + {by - 1}) / {by}), block=({bx}, {by})\n")
    name = rng.choice(["laplacian", "jacobi_step", "blur5", "heat_step"])
    sig = f"__global__ void {name}({_ptr(style, 'in')}, float* out, int {w}, int {h})"
    centre = {"laplacian": "-4.0f", "jacobi_step": "0.0f", "blur5": "1.0f", "heat_step": "-4.0f"}[name]
    scale = {"laplacian": "1.0f", "jacobi_step": "0.25f", "blur5": "0.2f", "heat_step": "0.1f"}[name]
    lines = [
        "    int x = blockIdx.x * blockDim.x + threadIdx.x;",
        "    int y = blockIdx.y * blockDim.y + threadIdx.y;",
        f"    if (x >= {w} || y >= {h}) {{",
        "        return;",
        "    }",
        f"    int c = y * {w} + x;",
        f"    if (x == 0 || y == 0 || x == {w} - 1 || y == {h} - 1) {{",
        "        out[c] = in[c];",
        "        return;",
        "    }",
        f"    float s = in[c - 1] + in[c + 1] + in[c - {w}] + in[c + {w}];",
        f"    out[c] = {scale} * (s + {centre} * in[c]);" if name != "heat_step"
        else f"    out[c] = in[c] + {scale} * (s + {centre} * in[c]);",
    ]
    return _header(rng, f"Five-point {name.replace('_', ' ')} on a 2D grid.") + spec + _open(style, sig) + "\n".join(lines) + "\n}\n"


def transpose_kernel(rng: random.Random, style: Style) -> str:
    tile = rng.choice([16, 32])
    rows, cols = rng.choice([("rows", "cols"), ("m", "n"), ("height", "width")])
    spec = (f"// dice: let {rows} = {rng.choice([1024, 2048, 4096])}\n// dice: let {cols} = {rng.choice([1024, 2048, 4096])}\n"
            f"// dice: buffer in[{rows} * {cols}], out[{rows} * {cols}]\n"
            f"// dice: launch grid=(({cols} + {tile - 1}) / {tile}, ({rows} + {tile - 1}) / {tile}), block=({tile}, {tile})\n")
    if rng.random() < 0.5:
        sig = f"__global__ void transpose_naive({_ptr(style, 'in')}, float* out, int {rows}, int {cols})"
        lines = [
            "    int c = blockIdx.x * blockDim.x + threadIdx.x;",
            "    int r = blockIdx.y * blockDim.y + threadIdx.y;",
            f"    if (r < {rows} && c < {cols}) {{",
            f"        out[(size_t)c * {rows} + r] = in[(size_t)r * {cols} + c];",
            "    }",
        ]
        summary = "Transpose, one element per thread: coalesced reads, strided writes."
    else:
        sig = f"__global__ void transpose_tiled({_ptr(style, 'in')}, float* out, int {rows}, int {cols})"
        lines = [
            f"    __shared__ float tile[{tile}][{tile} + 1];",
            f"    int c = blockIdx.x * {tile} + threadIdx.x;",
            f"    int r = blockIdx.y * {tile} + threadIdx.y;",
            f"    if (r < {rows} && c < {cols}) {{",
            f"        tile[threadIdx.y][threadIdx.x] = in[(size_t)r * {cols} + c];",
            "    }",
            "    __syncthreads();",
            f"    c = blockIdx.y * {tile} + threadIdx.x;",
            f"    r = blockIdx.x * {tile} + threadIdx.y;",
            f"    if (r < {cols} && c < {rows}) {{",
            f"        out[(size_t)r * {rows} + c] = tile[threadIdx.x][threadIdx.y];",
            "    }",
        ]
        summary = "Transpose through a padded shared-memory tile so reads and writes coalesce."
    return _header(rng, summary) + spec + _open(style, sig) + "\n".join(lines) + "\n}\n"


def matmul_kernel(rng: random.Random, style: Style) -> str:
    tile = rng.choice([8, 16, 32])
    M, N, K = rng.choice([("M", "N", "K"), ("m", "n", "k")])
    sz = rng.choice([512, 1024, 2048])
    spec = (f"// dice: let {M} = {sz}\n// dice: let {N} = {sz}\n// dice: let {K} = {rng.choice([256, 512, 1024])}\n"
            f"// dice: buffer A[{M} * {K}], B[{K} * {N}], C[{M} * {N}]\n"
            f"// dice: launch grid=(({N} + {tile - 1}) / {tile}, ({M} + {tile - 1}) / {tile}), block=({tile}, {tile})\n")
    if rng.random() < 0.4:
        sig = f"__global__ void matmul_naive({_ptr(style, 'A')}, {_ptr(style, 'B')}, float* C, int {M}, int {N}, int {K})"
        lines = [
            "    int row = blockIdx.y * blockDim.y + threadIdx.y;",
            "    int col = blockIdx.x * blockDim.x + threadIdx.x;",
            f"    if (row < {M} && col < {N}) {{",
            "        float acc = 0.0f;",
            f"        for (int p = 0; p < {K}; ++p) {{",
            f"            acc += A[row * {K} + p] * B[p * {N} + col];",
            "        }",
            f"        C[row * {N} + col] = acc;",
            "    }",
        ]
        summary = "C = A * B, one output element per thread."
    else:
        sig = f"__global__ void matmul_tiled({_ptr(style, 'A')}, {_ptr(style, 'B')}, float* C, int {M}, int {N}, int {K})"
        lines = [
            f"    __shared__ float As[{tile}][{tile}];",
            f"    __shared__ float Bs[{tile}][{tile}];",
            f"    int row = blockIdx.y * {tile} + threadIdx.y;",
            f"    int col = blockIdx.x * {tile} + threadIdx.x;",
            "    float acc = 0.0f;",
            f"    for (int t = 0; t < ({K} + {tile - 1}) / {tile}; ++t) {{",
            f"        int ak = t * {tile} + threadIdx.x;",
            f"        int bk = t * {tile} + threadIdx.y;",
            f"        As[threadIdx.y][threadIdx.x] = (row < {M} && ak < {K}) ? A[row * {K} + ak] : 0.0f;",
            f"        Bs[threadIdx.y][threadIdx.x] = (bk < {K} && col < {N}) ? B[bk * {N} + col] : 0.0f;",
            "        __syncthreads();",
            f"        for (int p = 0; p < {tile}; ++p) {{",
            "            acc += As[threadIdx.y][p] * Bs[p][threadIdx.x];",
            "        }",
            "        __syncthreads();",
            "    }",
            f"    if (row < {M} && col < {N}) {{",
            f"        C[row * {N} + col] = acc;",
            "    }",
        ]
        summary = f"C = A * B with {tile}x{tile} shared-memory tiles."
    return _header(rng, summary) + spec + _open(style, sig) + "\n".join(lines) + "\n}\n"


def histogram_kernel(rng: random.Random, style: Style) -> str:
    n, i = style.n_name, style.index
    bins = rng.choice([64, 128, 256])
    spec = (f"// dice: let {n} = 1 << {rng.choice([20, 22])}\n// dice: let bins = {bins}\n"
            f"// dice: buffer x[{n}], hist[bins]\n// dice: inout hist\n" + _launch_1d(style, n))
    sig = f"__global__ void histogram({_ptr(style, 'x')}, float* hist, int {n}, int bins)"
    body = [
        "float v = fminf(fmaxf(x[" + i + "], -1.0f), 0.999f);",
        "int b = (int)((v + 1.0f) * 0.5f * bins);",
        "atomicAdd(&hist[b], 1.0f);",
    ]
    return _header(rng, "Histogram of values in [-1, 1) with global atomics.") + spec + _open(style, sig) + "\n".join(_loop(style, body)) + "\n}\n"


def layernorm_kernel(rng: random.Random, style: Style) -> str:
    b = rng.choice([128, 256])
    rows, cols = rng.choice([("rows", "cols"), ("tokens", "hidden")])
    spec = (f"// dice: let {rows} = {rng.choice([1024, 4096])}\n// dice: let {cols} = {rng.choice([768, 1024, 4096])}\n"
            f"// dice: buffer x[{rows} * {cols}], gamma[{cols}], beta[{cols}], y[{rows} * {cols}]\n"
            f"// dice: launch grid={rows}, block={b}\n")
    sig = (f"__global__ void layer_norm({_ptr(style, 'x')}, {_ptr(style, 'gamma')}, "
           f"{_ptr(style, 'beta')}, float* y, int {rows}, int {cols})")
    lines = [
        f"    __shared__ float s_sum[{b}];",
        f"    __shared__ float s_sq[{b}];",
        "    int row = blockIdx.x;",
        f"    const float* xr = x + (size_t)row * {cols};",
        "    float sum = 0.0f;",
        "    float sq = 0.0f;",
        f"    for (int c = threadIdx.x; c < {cols}; c += blockDim.x) {{",
        "        float v = xr[c];",
        "        sum += v;",
        "        sq += v * v;",
        "    }",
        "    s_sum[threadIdx.x] = sum;",
        "    s_sq[threadIdx.x] = sq;",
        "    __syncthreads();",
        "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {",
        "        if (threadIdx.x < s) {",
        "            s_sum[threadIdx.x] += s_sum[threadIdx.x + s];",
        "            s_sq[threadIdx.x] += s_sq[threadIdx.x + s];",
        "        }",
        "        __syncthreads();",
        "    }",
        f"    float mean = s_sum[0] / {cols};",
        f"    float var = s_sq[0] / {cols} - mean * mean;",
        "    float inv = rsqrtf(var + 1e-5f);",
        f"    for (int c = threadIdx.x; c < {cols}; c += blockDim.x) {{",
        f"        y[(size_t)row * {cols} + c] = (xr[c] - mean) * inv * gamma[c] + beta[c];",
        "    }",
    ]
    return _header(rng, "Layer normalization over each row, one block per row.") + spec + _open(style, sig) + "\n".join(lines) + "\n}\n"


GENERATORS: list[Callable[[random.Random, Style], str]] = [
    unary_kernel, unary_kernel, binary_kernel, binary_kernel, axpby_kernel,
    vectorized_kernel, reduction_kernel, reduction_kernel, row_kernel, row_kernel,
    stencil_kernel, transpose_kernel, matmul_kernel, histogram_kernel, layernorm_kernel,
]


def random_style(rng: random.Random) -> Style:
    return Style(
        index=rng.choice(INDEX_NAMES),
        block=rng.choice([128, 256, 256, 512]),
        restrict=rng.random() < 0.6,
        grid_stride=rng.random() < 0.3,
        brace_newline=rng.random() < 0.5,
        n_name=rng.choice(COUNT_NAMES),
    )


def generate_file(rng: random.Random) -> str:
    """One .cu file of one to three kernels that share a spelling style (distinct names,
    so that the file compiles)."""
    style = random_style(rng)
    kernels: dict[str, str] = {}
    wanted = rng.choice([1, 1, 2, 3])
    while len(kernels) < wanted:
        source = rng.choice(GENERATORS)(rng, style)
        kernels.setdefault(KERNEL_NAME.search(source).group(1), source)
    return "#include <cuda_runtime.h>\n#include <math.h>\n\n" + "\n".join(kernels.values())


def generate(out_dir: Path, count: int, seed: int) -> list[Path]:
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(count):
        path = out_dir / f"gen_{k:05d}.cu"
        path.write_text(generate_file(rng))
        paths.append(path)
    return paths


def generator_main(description: str, write: Callable[[Path, int, int], list[Path]], count: int, seed: int) -> None:
    """The command line of a corpus generator: OUT_DIR [--count N] [--seed S]."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--count", type=int, default=count)
    ap.add_argument("--seed", type=int, default=seed)
    args = ap.parse_args()
    paths = write(args.out_dir, args.count, args.seed)
    print(f"wrote {len(paths)} files to {args.out_dir}")


def main() -> None:
    generator_main(__doc__.splitlines()[0], generate, count=3000, seed=0)


if __name__ == "__main__":
    main()
