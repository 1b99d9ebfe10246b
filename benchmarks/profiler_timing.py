"""Profiler benchmarks on the GPU machine:

1. Timing agreement: the profiler's timer (profiler.measure.timing.time_one: CUDA events, L2 flush,
   adaptive runs) against triton.testing.do_bench on the same kernels in the same process,
   alternating the two. Target: medians within 5%.
2. Overhead: wall time of profiler.judge for one small .cu candidate (compile + verify + time,
   each candidate in a fresh sandbox process), cold cache and warm, and for 8 candidates.
3. Where the time of one .cu candidate goes (`--section pool` runs only this): the costs of a
   fresh process (interpreter, CuPy import, CUDA context, NVRTC) measured apart; then one
   candidate cold and warm and 8 candidates, each with the sandbox pool off
   (DICE_SANDBOX_POOL=0: today's path exactly) and on, with the phases every verdict
   records; and `dice profile examples/saxpy.cu` as a fresh CLI process, off and on.
   Targets: one warm candidate <= 1.5 s, 8 candidates <= 4 s (pool on).
4. The same for KernelBench ModelNew candidates (a load_inline build each): one candidate,
   and 8 candidates whose builds run side by side before they are judged one by one. The
   baseline is judging them one after the other, build included: 8 times the one-candidate
   cost measured in the same run (candidates are independent, so that cost is linear).

Writes $OUT/profiler_timing.json and $OUT/profiler_timing.md (a table for docs/benchmarks.md),
and for section 3 $OUT/profiler_pool.json and $OUT/profiler_pool.md, rewritten after every
measurement; OUT defaults to ./.device-out. Run from the repository root:
    python benchmarks/profiler_timing.py [--section all|pool]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import profiler  # noqa: E402  (after the path is set)
from profiler.sandbox.pool import DEFAULT_KEEP, POOL_ENV  # noqa: E402

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
    from profiler.measure.timing import time_one
    from profiler.run.device import cupy_ops

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
    from profiler.judging.problem import build_jobs

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


# ------------------------------------------------------------------ 3. where the time goes

POOL_TARGETS = {"1 candidate, warm": 1.5, "8 candidates": 4.0}

FRESH_PROCESS = r"""
import json, os, sys, time
t0 = time.monotonic()
import numpy
t1 = time.monotonic()
import cupy
t2 = time.monotonic()
cupy.cuda.runtime.free(0)
t3 = time.monotonic()
source = open(sys.argv[1]).read()
m = cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=("saxpy",))
m.get_function("saxpy").attributes
t4 = time.monotonic()
m = cupy.RawModule(code=source + "\n// again", options=("-std=c++17",), name_expressions=("saxpy",))
m.get_function("saxpy").attributes
t5 = time.monotonic()
x = cupy.random.RandomState(1).standard_normal(1 << 24, dtype=cupy.float32)
cupy.cuda.runtime.deviceSynchronize()
t6 = time.monotonic()
rng = numpy.random.default_rng(1)
rng.standard_normal(1 << 24, dtype=numpy.float32)
t7 = time.monotonic()
print(json.dumps({"interpreter_started_at": t0, "import_numpy_s": t1 - t0, "import_cupy_s": t2 - t1,
                  "cuda_context_s": t3 - t2, "nvrtc_first_s": t4 - t3, "nvrtc_second_s": t5 - t4,
                  "inputs_16M_device_s": t6 - t5, "inputs_16M_host_s": t7 - t6}))
"""


def fresh_process_costs() -> dict:
    """What a process started for one .cu candidate pays before its own work, measured apart."""
    with tempfile.TemporaryDirectory() as cache:
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(REPO / "examples" / "saxpy.cu")],
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, "CUPY_CACHE_DIR": cache})
        ended = time.monotonic()
    if out.returncode != 0:
        log(f"  fresh process costs NOT measured: {out.stderr.strip()[-500:]}")
        return {}
    costs = json.loads(out.stdout.strip().splitlines()[-1])
    costs["interpreter_start_s"] = costs.pop("interpreter_started_at") - started
    costs["whole_process_s"] = ended - started
    clocked = time.monotonic()
    profiler.machine.gpu.clocks_mhz()  # NVML when installed, else an nvidia-smi process per call
    costs["clocks_query_s"] = time.monotonic() - clocked
    log("  a fresh process: " + ", ".join(f"{k} {v:.3f}" for k, v in costs.items()))
    return costs


def _phase_line(verdict) -> str:
    phases = verdict.extra.get("phases") or {}
    parts = [f"{k} {phases[k]:.2f}" for k in ("nvcc_check_s", "sandbox_s", "started_s_before", "turn_wait_s", "run_s", "total_s")
             if isinstance(phases.get(k), (int, float))]
    harness = phases.get("harness") or []
    return " | ".join(parts) + " | harness: " + ", ".join(f"{name} {s:.3f}" for name, s in harness)


def _judged(label: str, candidates: list[str], mode: str) -> dict:
    started = time.perf_counter()
    verdicts = profiler.judge(BASELINE, candidates, "saxpy.cu", time_limit=120.0)
    seconds = time.perf_counter() - started
    statuses = [v.status for v in verdicts]
    log(f"  [{mode}] {label:<20} {seconds:6.2f} s total, {seconds / len(candidates):5.2f} s per candidate; "
        f"statuses {sorted(set(statuses))}")
    for v in verdicts:
        log(f"      {_phase_line(v)}")
        if v.status not in ("faster", "not_faster"):
            log(f"      unexpected verdict: {v.status}: {v.message}")
    return {"seconds": seconds, "per_candidate_s": seconds / len(candidates), "statuses": statuses,
            "phases": [v.extra.get("phases") for v in verdicts], "messages": [v.message for v in verdicts]}


def _pool_ready(count: int, within_s: float = 60.0) -> float:
    """Wait (as an editor between two requests would) until `count` spares are ready."""
    from profiler.sandbox import POOL

    started = time.monotonic()
    while time.monotonic() - started < within_s:
        if sum(s.phase_reader.ready.is_set() for s in POOL.spares) >= count:
            break
        time.sleep(0.05)
    return time.monotonic() - started


def _cli_seconds(runs: int = 2) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "profile", "examples/saxpy.cu", "--json"],
                             capture_output=True, text=True, timeout=300, cwd=REPO)
        times.append(time.perf_counter() - started)
        if out.returncode != 0:
            log(f"      dice profile exited {out.returncode}: {out.stderr.strip()[-300:]}")
    return times


# Spares kept in the "pool on" mode: the default when it keeps any, else 4 (an editor's candidates).
POOL_ON = DEFAULT_KEEP or 4


def pool_overhead(save) -> dict:
    """Section 3: old path (pool off) and new path (pool on) in the same run."""
    from profiler.sandbox import POOL

    results: dict = {"fresh_process": fresh_process_costs()}
    save(results)
    variant = iter(range(100, 10_000))  # every candidate text new: nvcc's in-process cache never answers
    for mode, setting in (("pool off", "0"), ("pool on", str(POOL_ON))):
        os.environ[POOL_ENV] = setting
        runs: dict = {}
        results[mode] = runs
        with tempfile.TemporaryDirectory() as cold_cache:
            os.environ["XDG_CACHE_HOME"] = cold_cache  # nothing compiled, no peak bandwidth known yet
            os.environ.pop("CUPY_CACHE_DIR", None)
            runs["1 candidate, cold"] = _judged("1 candidate, cold", [candidate(next(variant))], mode)
            save(results)
            warm = []
            for _ in range(3):
                if setting != "0":
                    runs.setdefault("waited_for_spares_s", []).append(_pool_ready(int(setting)))
                warm.append(_judged("1 candidate, warm", [candidate(next(variant))], mode))
            runs["1 candidate, warm"] = {**warm[len(warm) // 2], "all_seconds": [w["seconds"] for w in warm],
                                         "seconds": statistics.median(w["seconds"] for w in warm)}
            save(results)
            if setting != "0":
                _pool_ready(int(setting))
            runs["8 candidates"] = _judged("8 candidates", [candidate(next(variant)) for _ in range(8)], mode)
            save(results)
            POOL.drain()  # this process's spares would compete with the CLI's process
            cli = runs["dice profile (CLI process), s"] = _cli_seconds()
            log(f"  [{mode}] dice profile examples/saxpy.cu: {', '.join(f'{t:.2f} s' for t in cli)}")
            save(results)
    os.environ.pop(POOL_ENV, None)
    for label, target in POOL_TARGETS.items():
        new, old = results["pool on"][label]["seconds"], results["pool off"][label]["seconds"]
        results.setdefault("targets", {})[label] = {"target_s": target, "pool_on_s": new, "pool_off_s": old,
                                                    "met": new <= target}
        log(f"  {label}: {old:.2f} s -> {new:.2f} s ({old / new:.1f}x; target <= {target} s: "
            f"{'met' if new <= target else 'NOT met'})")
    save(results)
    return results


def pool_markdown(gpu: str | None, results: dict) -> str:
    lines = [f"### Judging one .cu candidate on {gpu}: sandbox pool off vs on", "",
             "`profiler.judge` on `examples/saxpy.cu` variants (16M floats), same run; warm = median of 3:", "",
             "| run | pool off (s) | pool on (s) | speedup |", "| --- | --- | --- | --- |"]
    for label in ("1 candidate, cold", "1 candidate, warm", "8 candidates"):
        old, new = (results.get(m, {}).get(label, {}).get("seconds") for m in ("pool off", "pool on"))
        if old is not None and new is not None:
            lines.append(f"| {label} | {old:.2f} | {new:.2f} | {old / new:.1f}x |")
    cli = [results.get(m, {}).get("dice profile (CLI process), s") for m in ("pool off", "pool on")]
    if all(cli):
        lines.append(f"| `dice profile` (a fresh CLI process, 2nd run) | {cli[0][-1]:.2f} | {cli[1][-1]:.2f} | "
                     f"{cli[0][-1] / cli[1][-1]:.1f}x |")
    fresh = results.get("fresh_process") or {}
    if fresh:
        lines += ["", "What a fresh process pays before its own work (measured apart, s): "
                  + ", ".join(f"{k} {v:.3f}" for k, v in fresh.items())]
    return "\n".join(lines) + "\n"


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
    parser = argparse.ArgumentParser()
    parser.add_argument("--section", choices=("all", "pool"), default="all")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", ".device-out"))
    out.mkdir(parents=True, exist_ok=True)
    gpu = profiler.gpu_name()
    log(f"GPU: {gpu}")
    if gpu is None:
        log("no GPU: nothing to measure (run this on the GPU machine)")
        return 1

    def save_pool(results: dict) -> None:
        (out / "profiler_pool.json").write_text(json.dumps({"gpu": gpu, **results}, indent=1))
        (out / "profiler_pool.md").write_text(pool_markdown(gpu, results))

    log("where the time of one .cu candidate goes, sandbox pool off (today's path) and on:")
    pooled = pool_overhead(save_pool)
    log(f"wrote {out / 'profiler_pool.json'} and {out / 'profiler_pool.md'}")
    if args.section == "pool":
        return 0 if all(t["met"] for t in pooled.get("targets", {}).values()) else 1
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
