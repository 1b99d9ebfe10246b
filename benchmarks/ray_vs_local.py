"""The same problems judged by `dice bench` locally and through Ray (`--judge ray`, a local
cluster on this machine), in one run on the same GPUs: each candidate's status in both, the
speedups side by side with the local verdict's 95% interval, and the rate (candidates judged
a minute, per GPU) of each way.

    python benchmarks/ray_vs_local.py [--gpus 0] [--limit N] [--out DIR]

Candidates are the hand-written controls (benchmarks/kernelbench_controls: a correct and a
wrong ModelNew per problem) of the KernelBench problems in tests/data/kernelbench, so no
model is needed. Local runs first, then Ray; each run's wall time includes its start-up
(Ray's cluster start included). Writes DIR/ray_vs_local.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "tests" / "data" / "kernelbench"
CONTROLS = ROOT / "benchmarks" / "kernelbench_controls"


def bench(problems: Path, out: Path, gpus: str, judge: str | None, limit: int | None) -> float:
    """Seconds one `dice bench` run took (it writes out/results.json)."""
    command = [sys.executable, "-m", "dice_lsp.cli", "bench", str(problems), "--solutions", str(CONTROLS),
               "--out", str(out), "--json"]
    if limit is not None:
        command += ["--limit", str(limit)]
    if judge is not None:
        command += ["--judge", judge]
    started = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, "CUDA_VISIBLE_DEVICES": gpus}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    (out / "stderr.txt").write_text(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"dice bench {'--judge ' + judge if judge else '(local)'} failed ({done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    return seconds


def verdicts(out: Path) -> dict[str, dict]:
    data = json.loads((out / "results.json").read_text())
    found = {}
    for problem in data["problems"]:
        for candidate in problem["candidates"]:
            label = Path(candidate["generation"]["file"]).name
            found[f"{problem['name']}:{label}"] = candidate["verdict"]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="0", help="CUDA_VISIBLE_DEVICES for both runs (default 0: one GPU)")
    parser.add_argument("--limit", type=int, help="at most N problems")
    parser.add_argument("--out", default=os.environ.get("OUT", ".ray-vs-local"), help="where results go")
    args = parser.parse_args()
    out = Path(args.out) / "ray_vs_local"
    shutil.rmtree(out, ignore_errors=True)
    problems = out / "problems"
    # The problems that have controls, copied as the bench tests do.
    for control in CONTROLS.rglob("*.py"):
        stem = control.name.split(".")[0]
        source = PROBLEMS / control.parent.name / f"{stem}.py"
        if source.exists():
            (problems / control.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy(source, problems / control.parent.name / source.name)
    gpus = len([g for g in args.gpus.split(",") if g.strip()])
    local_s = bench(problems, out / "local", args.gpus, None, args.limit)
    ray_s = bench(problems, out / "ray", args.gpus, "ray", args.limit)
    local, ray = verdicts(out / "local"), verdicts(out / "ray")
    rows = []
    for key in sorted(local):
        mine, theirs = local[key], ray.get(key) or {}
        ci = mine.get("speedup_ci")
        rows.append({
            "candidate": key, "local": mine["status"], "ray": theirs.get("status"),
            "same_status": mine["status"] == theirs.get("status"),
            "speedup_local": mine.get("speedup"), "speedup_ray": theirs.get("speedup"), "local_ci95": ci,
            "ray_within_local_ci": (ci is not None and theirs.get("speedup") is not None
                                    and ci[0] <= theirs["speedup"] <= ci[1]),
            "ray_judged_on": (theirs.get("extra") or {}).get("judged_on"),
        })
    candidates = len(local)
    report = {
        "gpu": next((v.get("gpu") for v in local.values() if v.get("gpu")), None),
        "gpus": gpus,
        "candidates": candidates,
        "local_s": round(local_s, 1),
        "ray_s": round(ray_s, 1),
        "local_per_gpu_per_min": round(candidates / local_s * 60 / gpus, 2),
        "ray_per_gpu_per_min": round(candidates / ray_s * 60 / gpus, 2),
        "same_statuses": all(r["same_status"] for r in rows),
        "rows": rows,
    }
    (out / "ray_vs_local.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0 if report["same_statuses"] else 1


if __name__ == "__main__":
    sys.exit(main())
