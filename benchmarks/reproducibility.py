"""Does a verdict's speedup interval hold from one process to the next?

On the GPU machine, for a small problem (KernelBench's ReLU on 16 x 16384 floats: eager
PyTorch takes 5-25 us, launch-bound) and a larger one (its softmax over 1024 rows of 393216
floats, a few ms), each with an honest load_inline kernel of the adversarial library
(tests/profiler/adversarial, read as text), `dice profile FILE --json` runs RUNS times, each in a fresh
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

# (problem, its size change, honest candidate): the problems from tests/data/kernelbench, the
# candidates from the adversarial library's honest controls, spliced as `dice bench` splices.
SOURCES = {
    "small_relu": ("level1/19_ReLU.py", ("batch_size = 4096\ndim = 393216", "batch_size = 16\ndim = 16384"),
                   "honest_relu_vec4.py"),
    "large_softmax": ("level1/23_Softmax.py", ("batch_size = 4096", "batch_size = 1024"),
                      "honest_softmax_online.py"),
}


def document(problem: str, resize: tuple[str, str], candidate: str) -> str:
    from dice_lsp.bench.tasks import splice_model_new

    text = (REPO / "tests/data/kernelbench" / problem).read_text()
    if resize[0] not in text:
        raise SystemExit(f"{problem} no longer holds {resize[0]!r}")
    return splice_model_new(text.replace(*resize),
                            (REPO / "tests/profiler/adversarial" / candidate).read_text())


CASES = {name: document(*source) for name, source in SOURCES.items()}


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
