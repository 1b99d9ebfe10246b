"""What judging a KernelBench ModelNew costs, cold and warm, and where the build's time goes.

For each real file (a KernelBench problem with a hand-written load_inline ModelNew spliced
in, from benchmarks/kernelbench_controls), in one process:

- `profile` cold (nothing built yet) and warm (the same file again), and `judge` of the same
  candidate warm, with the process-wide build store (today's code);
- the same cold and warm `profile` with DICE_REUSE_BUILDS=0, which restores the behaviour
  before the store: each judging builds in a folder of its own, and profile's torch.compile
  run builds the document's extension a second time.

Each mode judges its own text (a comment differs), so neither finds the other's build. The
store's mode runs first and so pays the machine's first-use costs (page cache, CUDA). For
every sandboxed run: its kind, wall seconds, and the builds its process reported (ninja's
steps: main.o is the C++ glue with torch/extension.h, cuda.cuda.o the nvcc compile, the .so
the link). Targets: cold <= 30 s, warm <= 5 s.

Writes $OUT/kernelbench_build.json (after every measurement) and $OUT/kernelbench_build.md;
OUT defaults to ./.device-out. From the repository root, on the GPU machine:
    python benchmarks/kernelbench_build.py [--files 1|2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import profiler  # noqa: E402  (after the path is set)
import profiler.judge as judge_module  # noqa: E402
from dice_lsp.bench.tasks import splice_model_new  # noqa: E402
from profiler.sandbox.builds import REUSE_ENV  # noqa: E402

CONTROLS = REPO / "benchmarks" / "kernelbench_controls"
FILES = [("level1", "19_ReLU"), ("level2", "12_Gemm_Multiply_LeakyReLU")]
TARGET_COLD_S, TARGET_WARM_S = 30.0, 5.0


def log(message: str) -> None:
    print(message, flush=True)


SANDBOX_RUNS: list[dict] = []


def _recording(run_sandboxed):
    """run_sandboxed, recording each run's kind, wall time and the builds its process reported."""

    def run(request, *args, **kwargs):
        started = time.perf_counter()
        outcome = run_sandboxed(request, *args, **kwargs)
        extra = (outcome.result or {}).get("extra") or {}
        SANDBOX_RUNS.append({"kind": request["kind"], "gpu_hidden": (kwargs.get("env") or {}).get(
            "CUDA_VISIBLE_DEVICES") == "", "seconds": round(time.perf_counter() - started, 2),
                             "status": outcome.status, "builds": extra.get("builds", [])})
        return outcome

    return run


def _steps(builds: list[dict]) -> dict:
    """Seconds of each ninja step of the runs' builds: glue (main.o), nvcc (cuda.cuda.o), link (.so)."""
    steps = {"glue_s": 0.0, "nvcc_s": 0.0, "link_s": 0.0}
    for build in builds:
        for output, (start, end) in (build.get("steps") or {}).items():
            which = "glue_s" if output == "main.o" else "nvcc_s" if output.endswith(".cuda.o") else "link_s"
            steps[which] += end - start
    return {k: round(v, 2) for k, v in steps.items()}


def measure(label: str, call) -> dict:
    SANDBOX_RUNS.clear()
    started = time.perf_counter()
    verdict = call()
    seconds = time.perf_counter() - started
    runs = list(SANDBOX_RUNS)
    builds = [b for r in runs for b in r["builds"]]
    row = {"run": label, "seconds": round(seconds, 2), "status": verdict.status, "speedup": verdict.speedup,
           "sandboxes": runs, "build_s": round(sum(b["seconds"] for b in builds if not b["cached"]), 2),
           "fresh_builds": sum(not b["cached"] for b in builds), "cached_builds": sum(b["cached"] for b in builds),
           **_steps(builds)}
    per_kind = ", ".join(f"{r['kind']}{' (GPU hidden)' if r['gpu_hidden'] else ''} {r['seconds']:.1f} s"
                         for r in runs)
    log(f"  {label:<34} {seconds:6.1f} s  {verdict.status:<11} builds: {row['fresh_builds']} fresh "
        f"({row['build_s']:.1f} s: glue {row['glue_s']:.1f}, nvcc {row['nvcc_s']:.1f}, link {row['link_s']:.1f}), "
        f"{row['cached_builds']} found; sandboxes: {per_kind}")
    if verdict.status not in ("faster", "not_faster"):
        log(f"    unexpected verdict: {verdict.message}")
    return row


def one_file(problem_path: Path, control: Path, tag: str, rows: list[dict], save) -> None:
    """Measure one file in both modes, appending to `rows` and saving after each measurement."""
    problem = problem_path.read_text()
    document = splice_model_new(problem, control.read_text())
    for mode, reuse in (("store", "1"), ("before (DICE_REUSE_BUILDS=0)", "0")):
        os.environ[REUSE_ENV] = reuse
        text = document + f"\n# kernelbench_build {tag} {reuse}\n"  # a text of its own per mode
        path = problem_path.name
        for run in ("profile, cold", "profile, warm"):
            rows.append({"file": problem_path.stem, "mode": mode,
                         **measure(run, lambda: profiler.profile(text, path, time_limit=120.0))})
            save()
        if reuse == "1":
            rows.append({"file": problem_path.stem, "mode": mode, **measure(
                "judge, warm", lambda: profiler.judge(problem, [text], path, time_limit=120.0)[0])})
            save()
    os.environ.pop(REUSE_ENV, None)


def markdown(gpu: str, rows: list[dict]) -> str:
    lines = [f"### KernelBench build and judging time on {gpu} ({os.cpu_count()} CPUs)", "",
             f"Targets: cold <= {TARGET_COLD_S:.0f} s, warm <= {TARGET_WARM_S:.0f} s. Build steps are ninja's "
             "(glue: main.cpp with torch/extension.h; nvcc: cuda.cu; summed over the fresh builds of the run).", "",
             "| file | mode | run | wall (s) | sandboxes (s) | fresh builds | build (s) | glue (s) | nvcc (s) | "
             "link (s) | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        sandboxes = " + ".join(f"{s['kind']} {s['seconds']:.1f}" for s in r["sandboxes"])
        lines.append(f"| {r['file']} | {r['mode']} | {r['run']} | {r['seconds']:.1f} | {sandboxes} | "
                     f"{r['fresh_builds']} | {r['build_s']:.1f} | {r['glue_s']:.1f} | {r['nvcc_s']:.1f} | "
                     f"{r['link_s']:.1f} | {r['status']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1, choices=(1, 2), help="how many files (default 1)")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", ".device-out"))
    out.mkdir(parents=True, exist_ok=True)
    gpu = profiler.gpu_name()
    log(f"GPU: {gpu}; {os.cpu_count()} CPUs; MAX_JOBS={os.environ.get('MAX_JOBS', '(unset)')}")
    if gpu is None:
        log("no GPU: nothing to measure (run this on the GPU machine)")
        return 1
    judge_module.run_sandboxed = _recording(judge_module.run_sandboxed)
    kernelbench = Path(os.environ.get("DICE_SHARED", REPO.parent / "shared")) / "kernelbench"  # device-setup.sh sets it
    tag = f"{os.getpid()}-{int(time.time())}"
    rows: list[dict] = []

    def save() -> None:
        (out / "kernelbench_build.json").write_text(json.dumps({"gpu": gpu, "cpus": os.cpu_count(), "rows": rows},
                                                               indent=1))
        (out / "kernelbench_build.md").write_text(markdown(gpu, rows))

    for level, stem in FILES[:args.files]:
        log(f"{level}/{stem}:")
        one_file(kernelbench / level / f"{stem}.py", CONTROLS / level / f"{stem}.correct.py", tag, rows, save)
    log(f"wrote {out / 'kernelbench_build.json'} and {out / 'kernelbench_build.md'}")
    store = [r for r in rows if r["mode"] == "store"]
    cold = max(r["seconds"] for r in store if r["run"] == "profile, cold")
    warm = max(r["seconds"] for r in store if r["run"] != "profile, cold")
    log(f"TARGETS: cold {cold:.1f} s ({'met' if cold <= TARGET_COLD_S else 'NOT met'}, <= {TARGET_COLD_S:.0f} s); "
        f"warm {warm:.1f} s ({'met' if warm <= TARGET_WARM_S else 'NOT met'}, <= {TARGET_WARM_S:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
