"""Profiler benchmarks on the GPU machine:

1. Timing agreement: the profiler's timer (profiler.measure.timing.time_one: CUDA events, L2 flush,
   adaptive runs) against triton.testing.do_bench on the same kernels in the same process,
   alternating the two. Target: medians within 5%.
2. Overhead: wall time of profiler.judge for one small .cu candidate (compile + verify + time,
   each candidate in a fresh sandbox process), cold cache and warm, and for 8 candidates.
3. The same for KernelBench ModelNew candidates (a load_inline build each): one candidate,
   and 8 candidates whose builds run side by side before they are judged one by one. The
   baseline is judging them one after the other, build included: 8 times the one-candidate
   cost measured in the same run (candidates are independent, so that cost is linear).

Writes $OUT/profiler_timing.json and $OUT/profiler_timing.md (a table for docs/benchmarks.md);
OUT defaults to ./.device-out. Run from the repository root:
    python benchmarks/profiler_timing.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import profiler  # noqa: E402  (after the path is set)

AGREEMENT_TOLERANCE = 0.05

KERNELS = r"""
extern "C" __global__ void copy(const float* __restrict__ x, float* y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void strided_square(const float* __restrict__ x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { int j = (i % 32) * (n / 32) + i / 32; y[j] = x[j] * x[j]; }
}

extern "C" __global__ void fma_loop(float* y, int n, int iterations)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float a = y[i], b = 1.0001f;
        for (int k = 0; k < iterations; ++k) a = fmaf(a, b, 0.5f);
        y[i] = a;
    }
}
"""


def log(message: str) -> None:
    print(message, flush=True)


def agreement() -> list[dict]:
    import cupy
    import numpy as np

    try:
        from triton.testing import do_bench  # times through torch's events and current stream
    except ImportError as exc:
        log(f"timing agreement NOT measured: {exc}")
        return []
    from profiler.run.device import cupy_ops
    from profiler.measure.timing import time_one

    module = cupy.RawModule(code=KERNELS)
    ops = cupy_ops()
    rows = []

    def launcher(name, count, args, block=256):
        fn = module.get_function(name)
        grid = ((count + block - 1) // block,)
        return lambda: fn(grid, (block,), args)

    big = 1 << 26  # 256 MB per buffer
    x = cupy.random.standard_normal(big, dtype=cupy.float32)
    y = cupy.empty_like(x)
    cases = [
        ("copy 256 MB", launcher("copy", big, (x, y, np.int64(big)))),
        ("saxpy 16M", launcher("saxpy", 1 << 24, (np.float32(2.5), x, y, np.int64(1 << 24)))),
        ("saxpy 64K (tiny)", launcher("saxpy", 1 << 16, (np.float32(2.5), x, y, np.int64(1 << 16)))),
        ("strided square 16M", launcher("strided_square", 1 << 24, (x, y, np.int32(1 << 24)))),
        ("fma loop 1M x 4096", launcher("fma_loop", 1 << 20, (y, np.int32(1 << 20), np.int32(4096)))),
    ]
    for name, fn in cases:
        ours, theirs = [], []
        for _ in range(3):  # alternate the two timers so drift hits both
            ours.append(time_one(fn, ops, budget_s=0.5).median_ms)
            theirs.append(float(do_bench(fn, warmup=25, rep=200, return_mode="median")))
        ours_ms, triton_ms = sorted(ours)[1], sorted(theirs)[1]
        diff = (ours_ms - triton_ms) / triton_ms
        rows.append({"kernel": name, "profiler_ms": ours_ms, "triton_ms": triton_ms, "difference": diff,
                     "within_5_percent": abs(diff) <= AGREEMENT_TOLERANCE})
        log(f"  {name:<22} profiler {ours_ms:9.4f} ms   triton {triton_ms:9.4f} ms   {100 * diff:+6.2f}%")
    return rows


# The shipped example (16M floats): what judging costs for a small, real kernel.
BASELINE = (REPO / "examples" / "saxpy.cu").read_text()


def candidate(variant: int) -> str:
    # A different text per candidate, so every one is compiled (no cache hit between them).
    return BASELINE.replace("if (i < n)", f"/* variant {variant} */ if (i < n)")


def overhead() -> dict:
    results = {}
    with tempfile.TemporaryDirectory() as cold_cache:
        os.environ["XDG_CACHE_HOME"] = cold_cache  # the sandbox inherits it: nothing compiled yet
        os.environ.pop("CUPY_CACHE_DIR", None)
        for label, candidates in (("1 candidate, cold cache", [candidate(0)]),
                                  ("1 candidate, warm cache", [candidate(0)]),
                                  ("8 candidates", [candidate(v) for v in range(1, 9)])):
            started = time.perf_counter()
            verdicts = profiler.judge(BASELINE, candidates, "saxpy.cu", time_limit=120.0)
            seconds = time.perf_counter() - started
            statuses = [v.status for v in verdicts]
            timing_s = sum(v.extra.get("timing", {}).get("seconds", 0.0) for v in verdicts)
            results[label] = {"seconds": seconds, "per_candidate_s": seconds / len(candidates),
                              "timing_loop_s": timing_s, "statuses": statuses,
                              "messages": [v.message for v in verdicts]}
            log(f"  {label:<24} {seconds:7.2f} s total, {seconds / len(candidates):6.2f} s per candidate "
                f"({timing_s:5.2f} s of it in timing loops); statuses {sorted(set(statuses))}")
            bad = [v for v in verdicts if v.status not in ("faster", "not_faster")]
            for v in bad:
                log(f"    unexpected verdict: {v.status}: {v.message}")
    return results


KB_PROBLEM = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
"""

KB_NEW = '''
from torch.utils.cpp_extension import load_inline

relu_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* x, float* y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);  // VARIANT
}

torch::Tensor relu(torch::Tensor x)
{
    auto y = torch::empty_like(x);
    long long n = x.numel();
    relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

relu_ext = load_inline(name="NAME", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                       cuda_sources=relu_source, functions=["relu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu(x.contiguous())
'''


def kernelbench_candidate(variant: int, tag: str) -> str:
    # A new extension name and text per candidate: every one is really built.
    return KB_PROBLEM + KB_NEW.replace("NAME", f"dice_relu_{tag}_{variant}").replace("VARIANT", f"variant {variant}")


def kernelbench_overhead() -> dict:
    from profiler.judge import build_jobs

    results = {}
    tag = f"{os.getpid()}_{int(time.time())}"
    with tempfile.TemporaryDirectory() as cold_cache:
        os.environ["XDG_CACHE_HOME"] = cold_cache
        os.environ.pop("TORCH_EXTENSIONS_DIR", None)
        for label, count in (("KernelBench, 1 candidate", 1), ("KernelBench, 8 candidates, built ahead", 8)):
            candidates = [kernelbench_candidate(v, f"{tag}_{count}") for v in range(count)]
            started = time.perf_counter()
            verdicts = profiler.judge(KB_PROBLEM, candidates, "relu.py", time_limit=120.0)
            seconds = time.perf_counter() - started
            builds = [b for v in verdicts for b in v.extra.get("builds", [])]
            results[label] = {"seconds": seconds, "per_candidate_s": seconds / count,
                              "build_jobs": build_jobs(count), "statuses": [v.status for v in verdicts],
                              "judging_builds": builds, "messages": [v.message for v in verdicts]}
            log(f"  {label:<40} {seconds:7.2f} s total, {seconds / count:6.2f} s per candidate, "
                f"{build_jobs(count)} build(s) at a time; statuses {sorted(set(v.status for v in verdicts))}; "
                f"builds seen by the judging runs: {sum(not b['cached'] for b in builds)} fresh, "
                f"{sum(b['cached'] for b in builds)} from the cache")
            for v in verdicts:
                if v.status not in ("faster", "not_faster"):
                    log(f"    unexpected verdict: {v.status}: {v.message}")
    one = results["KernelBench, 1 candidate"]["seconds"]
    eight = results["KernelBench, 8 candidates, built ahead"]["seconds"]
    results["one_at_a_time_estimate_s"] = 8 * one
    log(f"  8 candidates one at a time would take 8 x {one:.1f} s = {8 * one:.1f} s: built ahead is "
        f"{8 * one / eight:.2f}x faster")
    return results


def markdown(gpu: str | None, rows: list[dict], costs: dict) -> str:
    lines = [f"### Profiler timing on {gpu}", "",
             "Median kernel time, the profiler's timer vs `triton.testing.do_bench` (median of 3 "
             "alternating measurements each, same process):", "",
             "| kernel | profiler (ms) | triton do_bench (ms) | difference |", "| --- | --- | --- | --- |"]
    lines += [f"| {r['kernel']} | {r['profiler_ms']:.4f} | {r['triton_ms']:.4f} | {100 * r['difference']:+.2f}% |"
              for r in rows]
    lines += ["", "Overhead of `profiler.judge` on a small .cu candidate (fresh sandbox process per candidate):",
              "", "| run | total (s) | per candidate (s) | of which timing loops (s) |", "| --- | --- | --- | --- |"]
    lines += [f"| {label} | {c['seconds']:.2f} | {c['per_candidate_s']:.2f} | {c['timing_loop_s']:.2f} |"
              for label, c in costs.items()]
    return "\n".join(lines) + "\n"


def kernelbench_markdown(costs: dict) -> str:
    lines = ["", "Overhead of `profiler.judge` on KernelBench ModelNew candidates (a `load_inline` build each):",
             "", "| run | total (s) | per candidate (s) | builds at a time |", "| --- | --- | --- | --- |"]
    lines += [f"| {label} | {c['seconds']:.1f} | {c['per_candidate_s']:.1f} | {c['build_jobs']} |"
              for label, c in costs.items() if isinstance(c, dict)]
    lines += [f"| 8 candidates one at a time (8 x the first row) | {costs['one_at_a_time_estimate_s']:.1f} | "
              f"{costs['one_at_a_time_estimate_s'] / 8:.1f} | 1 |"]
    return "\n".join(lines) + "\n"


def main() -> int:
    out = Path(os.environ.get("OUT", ".device-out"))
    out.mkdir(parents=True, exist_ok=True)
    gpu = profiler.gpu_name()
    log(f"GPU: {gpu}")
    if gpu is None:
        log("no GPU: nothing to measure (run this on the GPU machine)")
        return 1
    log("timing agreement with triton.testing.do_bench (target: within 5%):")
    rows = agreement()
    log("overhead of judging (compile + verify + time, sandboxed):")
    costs = overhead()
    log("overhead of judging KernelBench candidates (load_inline build + verify + time):")
    kernelbench = kernelbench_overhead()
    report = {"gpu": gpu, "agreement": rows, "overhead": costs, "kernelbench_overhead": kernelbench}
    (out / "profiler_timing.json").write_text(json.dumps(report, indent=1))
    (out / "profiler_timing.md").write_text(markdown(gpu, rows, costs) + kernelbench_markdown(kernelbench))
    log(f"wrote {out / 'profiler_timing.json'} and {out / 'profiler_timing.md'}")
    agreeing = all(r["within_5_percent"] for r in rows)
    log("AGREEMENT: " + ("all within 5%" if rows and agreeing else "NOT all within 5% (see table)" if rows
                         else "not measured"))
    return 0 if rows and agreeing else 1


if __name__ == "__main__":
    sys.exit(main())
