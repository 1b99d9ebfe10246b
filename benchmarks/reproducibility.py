"""Does a verdict's speedup interval hold from one process to the next?

On the GPU machine, for a small problem (ReLU on 16 x 16384 floats: eager PyTorch takes
5-25 us, launch-bound) and a larger one (softmax over rows of 393216 floats, a few ms), each
with an honest load_inline kernel, `dice profile FILE --json` runs RUNS times, each in a fresh
process. A case holds when every run's speedup lies inside every other run's 95% interval
(`speedup_ci`); a run whose verdict says "unstable" claims no interval and is left out of
the comparison. One run of each case first, both at once, builds the kernels and warms
torch.compile's caches (builds are kept for later processes where sandboxes run in
namespaces: DICE_BUILD_CACHE points at a folder of this run); it is reported apart and
not compared.

Writes a JSON report to --out (per run: status, speedup, interval, baseline_ms, time_ms,
the process's seconds; per case: whether it held and which pairs did not) and prints a
line per case. Run from the repository root, on the GPU machine, alone:

    python benchmarks/reproducibility.py --out $OUT/repro.json

It stops starting runs once --budget-s (default 300) has passed, and says so.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

RELU_DOCUMENT = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []


rect_source = r"""
#include <torch/extension.h>

// max(x, 0) with NaN kept, as torch.relu does; four floats per load where both buffers allow.
__global__ void rect_kernel(const float* __restrict__ src, float* __restrict__ dst, long long n, bool vec)
{
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long step = (long long)gridDim.x * blockDim.x;
    long long n4 = vec ? (n >> 2) : 0;
    const float4* s4 = reinterpret_cast<const float4*>(src);
    float4* d4 = reinterpret_cast<float4*>(dst);
    for (long long i = tid; i < n4; i += step) {
        float4 v = s4[i];
        v.x = v.x < 0.f ? 0.f : v.x;
        v.y = v.y < 0.f ? 0.f : v.y;
        v.z = v.z < 0.f ? 0.f : v.z;
        v.w = v.w < 0.f ? 0.f : v.w;
        d4[i] = v;
    }
    for (long long i = (n4 << 2) + tid; i < n; i += step) {
        float v = src[i];
        dst[i] = v < 0.f ? 0.f : v;
    }
}

torch::Tensor rect(torch::Tensor x)
{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "rect: a float32 CUDA tensor");
    auto src = x.contiguous();
    auto dst = torch::empty_like(src);
    long long n = src.numel();
    if (n == 0) return dst;
    bool vec = (reinterpret_cast<uintptr_t>(src.data_ptr<float>()) % 16 == 0)
            && (reinterpret_cast<uintptr_t>(dst.data_ptr<float>()) % 16 == 0);
    int threads = 256;
    long long wanted = ((vec ? n / 4 : n) + threads - 1) / threads;
    int device = 0, sms = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    long long cap = (long long)std::max(sms, 1) * 32;
    int blocks = (int)std::max<long long>(1, std::min(wanted, cap));
    rect_kernel<<<blocks, threads>>>(src.data_ptr<float>(), dst.data_ptr<float>(), n, vec);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "rect: ", cudaGetErrorString(err));
    return dst;
}
"""


rect_ext = load_inline(
    name="repro_rect_vec4",
    cpp_sources="torch::Tensor rect(torch::Tensor x);",
    cuda_sources=rect_source,
    functions=["rect"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rect_ext.rect(x)
'''

SOFTMAX_DOCUMENT = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 1024
dim = 393216


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []


softmax_source = r"""
#include <torch/extension.h>

#define ROW_THREADS 1024
#define FULL_MASK 0xffffffffu

// One running (max, sum of exp(x - max)) pair: a new value rescales the sum only when it
// raises the max, so a row is read once for both (online softmax, Milakov & Gimelshein).
__device__ __forceinline__ void take(float& m, float& s, float v)
{
    if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
    } else {
        s += expf(v - m);
    }
}

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2)
{
    float top = fmaxf(m, m2);
    if (top == -INFINITY) return;  // both empty
    s = s * expf(m - top) + s2 * expf(m2 - top);
    m = top;
}

// One block per row: pass 1 reads the row once for its max and sum, pass 2 reads it again and
// writes exp(x - max) / sum. Two reads and one write of the row in all.
__global__ void __launch_bounds__(ROW_THREADS) row_softmax(const float* __restrict__ x, float* __restrict__ y,
                                                          long long cols, bool vec)
{
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = -INFINITY, s = 0.0f;
    long long n4 = vec ? cols / 4 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (long long i = threadIdx.x; i < n4; i += ROW_THREADS) {
        float4 v = x4[i];
        take(m, s, v.x);
        take(m, s, v.y);
        take(m, s, v.z);
        take(m, s, v.w);
    }
    for (long long i = n4 * 4 + threadIdx.x; i < cols; i += ROW_THREADS) take(m, s, xr[i]);

    for (int offset = 16; offset > 0; offset >>= 1) {
        float m2 = __shfl_xor_sync(FULL_MASK, m, offset);
        float s2 = __shfl_xor_sync(FULL_MASK, s, offset);
        merge(m, s, m2, s2);
    }
    __shared__ float warp_m[ROW_THREADS / 32], warp_s[ROW_THREADS / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_m[warp] = m;
        warp_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < ROW_THREADS / 32 ? warp_m[lane] : -INFINITY;
        s = lane < ROW_THREADS / 32 ? warp_s[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            float m2 = __shfl_xor_sync(FULL_MASK, m, offset);
            float s2 = __shfl_xor_sync(FULL_MASK, s, offset);
            merge(m, s, m2, s2);
        }
        if (lane == 0) {
            warp_m[0] = m;
            warp_s[0] = s;
        }
    }
    __syncthreads();
    const float row_max = warp_m[0];
    const float row_sum = warp_s[0];

    float4* y4 = reinterpret_cast<float4*>(yr);
    for (long long i = threadIdx.x; i < n4; i += ROW_THREADS) {
        float4 v = x4[i];
        v.x = expf(v.x - row_max) / row_sum;
        v.y = expf(v.y - row_max) / row_sum;
        v.z = expf(v.z - row_max) / row_sum;
        v.w = expf(v.w - row_max) / row_sum;
        y4[i] = v;
    }
    for (long long i = n4 * 4 + threadIdx.x; i < cols; i += ROW_THREADS) yr[i] = expf(xr[i] - row_max) / row_sum;
}

torch::Tensor softmax_last(torch::Tensor x)
{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() >= 1, "softmax_last: float32 CUDA");
    auto src = x.contiguous();
    auto dst = torch::empty_like(src);
    long long cols = src.size(-1);
    long long rows = cols ? src.numel() / cols : 0;
    if (rows == 0) return dst;
    bool vec = cols % 4 == 0 && reinterpret_cast<uintptr_t>(src.data_ptr<float>()) % 16 == 0
               && reinterpret_cast<uintptr_t>(dst.data_ptr<float>()) % 16 == 0;
    row_softmax<<<(unsigned int)rows, ROW_THREADS>>>(src.data_ptr<float>(), dst.data_ptr<float>(), cols, vec);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "softmax_last: ", cudaGetErrorString(err));
    return dst;
}
"""


softmax_ext = load_inline(
    name="repro_row_softmax_online",
    cpp_sources="torch::Tensor softmax_last(torch::Tensor x);",
    cuda_sources=softmax_source,
    functions=["softmax_last"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            return softmax_ext.softmax_last(x)
        return torch.softmax(x, dim=1)
'''

CASES = {"small_relu": RELU_DOCUMENT, "large_softmax": SOFTMAX_DOCUMENT}


def profile_once(path: Path, env: dict[str, str], timeout_s: float) -> dict:
    """One `dice profile PATH --json` in a fresh process: its verdict's numbers, or why none."""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "profile", str(path), "--json"], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": "no_result", "why": f"dice profile ran past {timeout_s:.0f} s",
                "process_s": round(time.monotonic() - started, 1)}
    seconds = round(time.monotonic() - started, 1)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"status": "no_result", "why": f"exit {done.returncode}, no JSON: {done.stderr.strip()[-600:]}",
                "process_s": seconds}
    verdict = json.loads(lines[-1])
    extra = verdict.get("extra") or {}
    return {"status": verdict.get("status"), "speedup": verdict.get("speedup"), "interval": verdict.get("speedup_ci"),
            "baseline_ms": verdict.get("baseline_ms"), "time_ms": verdict.get("time_ms"),
            "message": verdict.get("message"), "gpu": verdict.get("gpu"), "exit_code": done.returncode,
            "process_s": seconds, "isolation": extra.get("isolation"),
            "timed_pairs": (extra.get("timing") or {}).get("runs")}


def held(runs: list[dict]) -> tuple[bool, list[str]]:
    """Whether every compared run's speedup lies inside every other compared run's interval
    (runs saying "unstable" are not compared), and what did not."""
    problems, compared = [], []
    for number, run in enumerate(runs, start=1):
        if run["status"] == "unstable":
            continue
        if run.get("speedup") is None or not run.get("interval"):
            problems.append(f"run {number}: {run['status']}, no speedup and interval: "
                            f"{run.get('why') or run.get('message')}")
            continue
        compared.append((number, run))
    for (i, a), (j, b) in itertools.permutations(compared, 2):
        low, high = b["interval"]
        if not low <= a["speedup"] <= high:
            problems.append(f"run {i}'s speedup {a['speedup']:.4f} is outside run {j}'s interval {low:.4f}-{high:.4f}")
    if len(compared) < 2:
        problems.append(f"{len(compared)} run(s) to compare")
    return not problems, problems


def summary(name: str, case: dict) -> str:
    runs = case["runs"]
    speedups = [r["speedup"] for r in runs if r.get("speedup") is not None]
    shown = ", ".join(f"{r['speedup']:.3f} [{r['interval'][0]:.3f}-{r['interval'][1]:.3f}]"
                      if r.get("speedup") is not None and r.get("interval") else r["status"] for r in runs)
    spread = f"{min(speedups):.3f}-{max(speedups):.3f}" if speedups else "-"
    verdict = "held" if case["held"] else f"did not hold ({len(case['problems'])} problem(s))"
    return f"{name}: {len(runs)} runs, speedups {spread}: {shown}; {verdict}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where the JSON report goes")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=300.0, help="no run starts after this many seconds")
    parser.add_argument("--timeout-s", type=float, default=240.0, help="one dice profile process at most")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dice-repro-") as folder:
        env = dict(os.environ)
        env["DICE_BUILD_CACHE"] = str(Path(folder) / "builds")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        paths = {}
        for name, document in CASES.items():
            paths[name] = Path(folder) / f"{name}.py"
            paths[name].write_text(document)
        report = {"runs_per_case": args.runs, "cases": {name: {"document": document, "runs": []}
                                                        for name, document in CASES.items()}}

        def write() -> None:
            report["seconds"] = round(time.monotonic() - started, 1)
            out.write_text(json.dumps(report, indent=1))

        print(f"warm-up: both cases at once (builds, torch.compile caches) in {folder}", flush=True)
        with ThreadPoolExecutor(len(CASES)) as pool:
            warm = dict(zip(CASES, pool.map(lambda name: profile_once(paths[name], env, args.timeout_s), CASES)))
        for name, run in warm.items():
            report["cases"][name]["warmup"] = run
            print(f"  {name}: {run['status']} {run.get('speedup')} {run.get('interval')} ({run['process_s']} s)",
                  flush=True)
        write()
        stopped = None
        for number in range(1, args.runs + 1):
            for name in CASES:
                if time.monotonic() - started > args.budget_s:
                    stopped = f"the budget of {args.budget_s:.0f} s ran out before run {number} of {name}"
                    break
                run = profile_once(paths[name], env, args.timeout_s)
                report["cases"][name]["runs"].append(run)
                print(f"run {number} {name}: {run['status']} {run.get('speedup')} {run.get('interval')} "
                      f"({run['process_s']} s)", flush=True)
                write()
            if stopped:
                break
        report["stopped"] = stopped
        report["gpu"] = next((run.get("gpu") for case in report["cases"].values() for run in case["runs"]
                              if run.get("gpu")), None)
        for name, case in report["cases"].items():
            case["held"], case["problems"] = held(case["runs"]) if case["runs"] else (False, ["no runs"])
            if stopped and len(case["runs"]) < args.runs:
                case["problems"].append(stopped)
                case["held"] = False
        write()
    for name, case in report["cases"].items():
        print(summary(name, case))
    if stopped:
        print(stopped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
