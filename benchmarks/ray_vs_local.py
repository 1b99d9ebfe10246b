"""The same problems judged by `dice bench` locally and through Ray (`--judge ray`, a local
cluster on this machine), in one run on the same GPUs: each candidate's status in both, the
speedups side by side with the local verdict's 95% interval, and the rate (candidates judged
a minute, per GPU) of each way.

    python benchmarks/ray_vs_local.py [--gpus 0] [--limit N] [--problems STEM,...] [--kill-and-resume] [--out DIR]

Candidates are the hand-written controls (benchmarks/kernelbench_controls: a correct and a
wrong ModelNew per problem) of the KernelBench problems in tests/data/kernelbench, so no
model is needed. Local runs first, then Ray; each run's wall time includes its start-up
(Ray's cluster start included). With --kill-and-resume a third run goes through Ray: the
Ray worker judging its first problem is killed (SIGKILL: the problem must be judged again
elsewhere), the run is stopped (SIGINT, as Ctrl-C) once a problem is saved, and `--resume`
finishes it; its statuses are compared with the local run's too. Writes
DIR/ray_vs_local.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "tests" / "data" / "kernelbench"
CONTROLS = ROOT / "benchmarks" / "kernelbench_controls"


# The title Ray gives a worker process while it runs a verdict task (RayJudgePool's judge_on_gpu).
RAY_VERDICT_TITLE = b"ray::judge_on_gpu"


def bench_command(problems: Path, out: Path, judge: str | None, limit: int | None, *more: str) -> list[str]:
    command = [sys.executable, "-m", "dice_lsp.cli", "bench", str(problems), "--solutions", str(CONTROLS),
               "--out", str(out), "--json", *more]
    if limit is not None:
        command += ["--limit", str(limit)]
    if judge is not None:
        command += ["--judge", judge]
    return command


def bench(problems: Path, out: Path, gpus: str, judge: str | None, limit: int | None) -> float:
    """Seconds one `dice bench` run took (it writes out/results.json)."""
    command = bench_command(problems, out, judge, limit)
    started = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, "CUDA_VISIBLE_DEVICES": gpus}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    (out / "stderr.txt").write_text(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"dice bench {'--judge ' + judge if judge else '(local)'} failed ({done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    return seconds


def ray_verdict_workers() -> list[int]:
    """Process ids of this machine's Ray workers running a verdict task now."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/cmdline").read_bytes().startswith(RAY_VERDICT_TITLE):
                found.append(int(entry))
        except OSError:
            continue
    return found


def problems_done(out: Path) -> int:
    try:
        data = json.loads((out / "results.json").read_text())
    except (OSError, ValueError):  # not written yet, or being written
        return 0
    return sum(p["state"] == "done" for p in data["problems"])


def killed_and_resumed(problems: Path, out: Path, gpus: str, limit: int | None, seconds: float = 240) -> dict:
    """A Ray run whose first verdict worker is killed and which is stopped after its first
    saved problem, then finished with --resume: what happened at each step."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpus}
    started = time.perf_counter()
    with open(out.with_suffix(".stderr.txt"), "w") as stderr:
        run = subprocess.Popen(bench_command(problems, out, "ray", limit), env=env, stdout=subprocess.DEVNULL,
                               stderr=stderr)
        killed: list[int] = []
        stopped_after = None
        deadline = time.monotonic() + seconds
        while run.poll() is None and time.monotonic() < deadline:
            if not killed:
                for pid in ray_verdict_workers()[:1]:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            elif stopped_after is None and problems_done(out) >= 1:
                stopped_after = problems_done(out)
                run.send_signal(signal.SIGINT)
            time.sleep(0.2)
        if run.poll() is None:
            run.kill()
        stopped_rc = run.wait()
    resume = subprocess.run(bench_command(problems, out, "ray", limit, "--resume"), env=env, capture_output=True,
                            text=True)
    (out / "resume.stderr.txt").write_text(resume.stderr)
    judged_again = [key for key, verdict in verdicts(out).items()
                    if ((verdict.get("extra") or {}).get("judged_on") or {}).get("attempts", 1) > 1]
    return {"killed_ray_worker": killed, "stopped_with_problems_done": stopped_after, "stopped_rc": stopped_rc,
            "resume_rc": resume.returncode, "seconds": round(time.perf_counter() - started, 1),
            "judged_again": judged_again,
            "lost": sorted({why for v in verdicts(out).values()
                            for why in ((v.get("extra") or {}).get("judged_on") or {}).get("lost", [])})}


def verdicts(out: Path) -> dict[str, dict]:
    data = json.loads((out / "results.json").read_text())
    found = {}
    for problem in data["problems"]:
        for candidate in problem["candidates"]:
            label = Path(candidate["generation"]["file"]).name
            # a problem that could not be judged has no verdict: its status reads None
            found[f"{problem['name']}:{label}"] = candidate.get("verdict") or {"status": None}
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="0", help="CUDA_VISIBLE_DEVICES for both runs (default 0: one GPU)")
    parser.add_argument("--limit", type=int, help="at most N problems")
    parser.add_argument("--problems", help="only these problems (file stems, comma-separated) of those with controls")
    parser.add_argument("--kill-and-resume", action="store_true",
                        help="a third run through Ray: a verdict worker killed, the run stopped and resumed")
    parser.add_argument("--out", default=os.environ.get("OUT", ".ray-vs-local"), help="where results go")
    args = parser.parse_args()
    out = Path(args.out) / "ray_vs_local"
    shutil.rmtree(out, ignore_errors=True)
    problems = out / "problems"
    # The problems that have controls, copied as the bench tests do.
    only = set(args.problems.split(",")) if args.problems else None
    for control in CONTROLS.rglob("*.py"):
        stem = control.name.split(".")[0]
        if only is not None and stem not in only:
            continue
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
    (out / "ray_vs_local.json").write_text(json.dumps(report, indent=1))  # kept should the last run hang
    if args.kill_and_resume:
        report["killed_and_resumed"] = story = killed_and_resumed(problems, out / "ray-killed", args.gpus, args.limit)
        resumed = verdicts(out / "ray-killed")
        story["same_statuses_as_local"] = {k: v["status"] for k, v in resumed.items()} == \
            {k: v["status"] for k, v in local.items()}
        report["same_statuses"] = report["same_statuses"] and story["same_statuses_as_local"] \
            and story["resume_rc"] == 0 and bool(story["killed_ray_worker"])
    (out / "ray_vs_local.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0 if report["same_statuses"] else 1


if __name__ == "__main__":
    sys.exit(main())
