"""`dice bench` over the 50 KernelBench level1 problems, one candidate each, resumable.

    python benchmarks/bench_level1.py [--budget-s 330] [--state .bench-level1] [--out $OUT/bench_level1]
                                      [--restore .bench-level1.tar.gz] [--phases rate] [--build-jobs 12]
                                      [--rate-problems 10]

Candidates: the hand-written correct control of benchmarks/kernelbench_controls where one
exists, else one answer of the built-in model (`--model builtin`). Phases, each a
`dice bench ... --resume` into a folder of its own under STATE (an ignored folder of the
checkout, kept between calls while the device machine stays warm; on a fresh machine copy
the last call's OUT/bench_level1/state.tar.gz to .bench-level1.tar.gz, carry it and pass
`--restore .bench-level1.tar.gz`: a device call brings back at most 8 files, so the state
travels as one archive), so that a call cut at its limit (a device call lasts <= 10 minutes)
goes on where it stopped when run again:

1. controls: the problems with a control (`--solutions`);
2. builtin:  the other problems (`--model builtin --candidates 1`);
3. rate:     the first RATE_PROBLEMS (--rate-problems) controlled problems with RATE_COPIES copies of their
             control each (distinct documents, each built and judged on its own, as
             several model candidates would be): candidates judged per minute;
4. alone:    RETIME_PROBLEMS correct controls re-timed by `dice profile`, alone on the
             machine (no build running), against the speedups the bench measured while
             builds ran.

`--phases` runs some of them only; `--build-jobs` sets DICE_BUILD_JOBS for dice bench (how
many candidates build at once; default half the CPUs). Each phase's CPU use is read from
/proc/stat before and after it: the mean number of busy CPUs says whether builds had the
machine's CPUs to themselves or left them idle.

Prints and writes STATE/bench_level1.{json,md} after every phase, copied to OUT at the end
of the call beside OUT/state.tar.gz (the logs and each phase's results): problems judged, wall time
of each phase summed over calls, candidates per minute, and the agreement table. The
phases stop starting new work when --budget-s is spent (dice bench is interrupted and
saves what it judged); the script then exits 0, and the next call continues.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dice_lsp.bench.problems import discover  # noqa: E402
from dice_lsp.bench.results import RESULTS_FILE  # noqa: E402
from dice_lsp.bench.solutions import correct_control, solution_files  # noqa: E402
from dice_lsp.bench.tasks import splice_model_new  # noqa: E402

CONTROLS = REPO / "benchmarks" / "kernelbench_controls"
RATE_PROBLEMS = 6
RATE_COPIES = 4
RETIME_PROBLEMS = 3
# Two timings of one file in two processes differ by more than their own bootstrap
# intervals say (clocks, placement of the buffers): tests/dice_lsp/bench/test_bench_gpu.py allows this.
CROSS_PROCESS_SLACK = 0.10
STOP_GRACE_S = 30
PHASES = ("controls", "builtin", "rate", "alone")


def cpu_times() -> tuple[float, float] | None:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat (None
    elsewhere): busy is all but idle and iowait."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields) - idle) / tick, sum(fields) / tick


def shared_level1() -> Path:
    root = Path(os.environ.get("DICE_SHARED", REPO / "tests" / "data")) / "kernelbench" / "level1"
    if not root.is_dir():
        sys.exit(f"bench_level1: no KernelBench level1 at {root} (set DICE_SHARED)")
    return root


def prepare(out: Path, rate_problems: int = RATE_PROBLEMS) -> dict[str, Path]:
    """The problem and solution folders of each phase (made once, kept for the next calls)."""
    problems, _ = discover(shared_level1())
    controls = solution_files(CONTROLS)
    # Problems under a folder named level1: their level in the tables.
    folders = {name: out / "inputs" / name / "level1" for name in ("controls", "builtin", "rate", "rate-solutions")}
    if (out / "inputs").exists():
        return folders
    for folder in folders.values():
        folder.mkdir(parents=True)
    controlled = []
    for problem in problems:
        control = correct_control(str(problem.path), controls)
        shutil.copy(problem.path, folders["builtin" if control is None else "controls"] / problem.path.name)
        if control is not None:
            controlled.append((problem, control))
    for problem, control in controlled[:rate_problems]:
        shutil.copy(problem.path, folders["rate"] / problem.path.name)
        text = control.read_text()
        for copy in range(1, RATE_COPIES + 1):
            stem = problem.path.stem
            (folders["rate-solutions"] / f"{stem}.copy{copy}.py").write_text(f"# copy {copy}\n{text}")
    return folders


def results(folder: Path) -> dict:
    try:
        return json.loads((folder / RESULTS_FILE).read_text())
    except (OSError, ValueError):
        return {"problems": []}


def judged(folder: Path) -> tuple[int, int]:
    """(problems finished, candidates with a verdict) in a phase's results."""
    problems = [p for p in results(folder)["problems"] if p["state"] in ("done", "error")]
    return len(problems), sum(1 for p in problems for c in p["candidates"] if c.get("verdict"))


def run_bench(argv: list[str], log: Path, seconds: float) -> tuple[int | None, float]:
    """`dice bench ARGV`, interrupted (SIGINT: it saves and exits) when `seconds` run out;
    (its exit status or None when interrupted, its wall time)."""
    started = time.monotonic()
    with open(log, "a") as sink:
        sink.write(f"\n== {time.strftime('%H:%M:%S')} dice bench {' '.join(argv)}\n")
        sink.flush()
        proc = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "bench", *argv], stdout=sink,
                                stderr=subprocess.STDOUT, cwd=REPO)
        try:
            return proc.wait(timeout=max(1.0, seconds)), time.monotonic() - started
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return None, time.monotonic() - started


def retime_alone(out: Path, controls_dir: Path, state: dict, deadline: float) -> None:
    """`dice profile` of the spliced best candidate of RETIME_PROBLEMS correct, timed controls."""
    run = results(controls_dir)
    rows = state.setdefault("alone", [])
    done = {r["problem"] for r in rows}
    picked = [p for p in run["problems"] if p["state"] == "done"
              and any(c["verdict"] and c["verdict"].get("correct") and c["verdict"].get("speedup_ci")
                      for c in p["candidates"])][:RETIME_PROBLEMS]
    for problem in picked:
        if problem["name"] in done or time.monotonic() > deadline:
            continue
        verdict = next(c["verdict"] for c in problem["candidates"] if c["verdict"] and c["verdict"].get("correct"))
        candidate = next(c for c in problem["candidates"] if c["verdict"] is verdict)
        spliced = out / "alone" / Path(problem["path"]).name
        spliced.parent.mkdir(parents=True, exist_ok=True)
        spliced.write_text(splice_model_new(Path(problem["path"]).read_text(), candidate["text"]))
        started = time.monotonic()
        done_proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "profile", str(spliced), "--json"],
                                   capture_output=True, text=True, cwd=REPO,
                                   timeout=max(30.0, deadline - time.monotonic() + STOP_GRACE_S))
        try:
            alone = json.loads(done_proc.stdout)
        except ValueError:
            alone = {"message": done_proc.stderr[-500:]}
        rows.append(agreement(problem["name"], verdict, alone, time.monotonic() - started))


def agreement(name: str, bench: dict, alone: dict, seconds: float) -> dict:
    row = {"problem": name, "bench_speedup": bench.get("speedup"), "bench_ci": bench.get("speedup_ci"),
           "alone_speedup": alone.get("speedup"), "alone_ci": alone.get("speedup_ci"),
           "alone_message": alone.get("message", ""), "alone_seconds": round(seconds, 1)}
    if row["bench_ci"] and row["alone_ci"]:
        (b_low, b_high), (a_low, a_high) = row["bench_ci"], row["alone_ci"]
        row["intervals_overlap"] = b_low <= a_high and a_low <= b_high
        s = CROSS_PROCESS_SLACK
        row["agree_with_slack"] = b_low * (1 - s) <= a_high * (1 + s) and a_low * (1 - s) <= b_high * (1 + s)
    return row


def report(out: Path, folders: dict[str, Path], state: dict, total_problems: int) -> dict:
    phases = {}
    for name in ("controls", "builtin", "rate"):
        problems, candidates = judged(out / name)
        seconds = state["seconds"].get(name, 0.0)
        phases[name] = {"problems": problems, "of": len(list(folders[name].glob("*.py"))), "candidates": candidates,
                        "seconds": round(seconds, 1),
                        "candidates_per_minute": round(60 * candidates / seconds, 2) if seconds else None,
                        "complete": state["complete"].get(name, False)}
    level1 = phases["controls"]["problems"] + phases["builtin"]["problems"]
    level1_s = phases["controls"]["seconds"] + phases["builtin"]["seconds"]
    summary = {"level1_problems": total_problems, "level1_judged": level1, "level1_seconds": round(level1_s, 1),
               "level1_minutes": round(level1_s / 60, 1), "level1_target_minutes": 30,
               "phases": phases, "alone": state.get("alone", []), "calls": state["calls"], "cpu": state.get("cpu", {})}
    (out / "bench_level1.json").write_text(json.dumps(summary, indent=1))
    lines = ["# dice bench, KernelBench level1, one candidate each", "",
             f"level1: {level1}/{total_problems} problems judged in {level1_s / 60:.1f} min of dice bench "
             f"(target < 30 min), over {state['calls']} call(s)", "",
             "| phase | problems | candidates | seconds | candidates/min | complete |", "| --- | --- | --- | --- | --- | --- |"]
    for name, p in phases.items():
        lines.append(f"| {name} | {p['problems']}/{p['of']} | {p['candidates']} | {p['seconds']} | "
                     f"{p['candidates_per_minute']} | {p['complete']} |")
    if summary["cpu"]:
        lines += ["", "CPU use of each call's phase (from /proc/stat):", "",
                  "| phase | seconds | busy CPUs (mean) | of | share busy | DICE_BUILD_JOBS |", "| --- | --- | --- | --- | --- | --- |"]
        for name, calls in summary["cpu"].items():
            for c in calls:
                lines.append(f"| {name} | {c['seconds']} | {c['busy_cpus']} | {c['cpus']} | {c['busy_share']} | "
                             f"{c['build_jobs']} |")
    if summary["alone"]:
        lines += ["", "Speedups while builds ran (bench) against alone (`dice profile`), 95% intervals:", "",
                  "| problem | bench | alone | intervals overlap | within 10% slack |", "| --- | --- | --- | --- | --- |"]
        for r in summary["alone"]:
            def show(x, ci):
                return f"{x:.3f} ({ci[0]:.3f}-{ci[1]:.3f})" if x is not None and ci else f"- ({r['alone_message'][:60]})"
            lines.append(f"| {r['problem']} | {show(r['bench_speedup'], r['bench_ci'])} | "
                         f"{show(r['alone_speedup'], r['alone_ci'])} | {r.get('intervals_overlap')} | "
                         f"{r.get('agree_with_slack')} |")
    (out / "bench_level1.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_out = Path(os.environ.get("OUT", REPO / ".device-out")) / "bench_level1"
    parser.add_argument("--state", type=Path, default=REPO / ".bench-level1", help="where the runs resume from")
    parser.add_argument("--out", type=Path, default=default_out, help="where this call's report goes")
    parser.add_argument("--budget-s", type=float, default=330.0, help="stop starting work after this (default 330)")
    parser.add_argument("--restore", type=Path, help="a state.tar.gz of an earlier call, unpacked when --state is absent")
    parser.add_argument("--phases", default=",".join(PHASES), help=f"which of {', '.join(PHASES)} (default all)")
    parser.add_argument("--build-jobs", type=int, help="DICE_BUILD_JOBS for dice bench (default: half the CPUs)")
    parser.add_argument("--rate-problems", type=int, default=RATE_PROBLEMS,
                        help=f"controlled problems in the rate phase (default {RATE_PROBLEMS}; set when STATE is made)")
    parser.add_argument("--archive-only", action="store_true", help="only keep --state's archive in --out, and stop")
    parser.add_argument("--restore-only", action="store_true", help="only unpack --restore into --state, and stop")
    args = parser.parse_args()
    if args.archive_only or args.restore_only:
        if args.archive_only:
            keep(args.state.resolve(), args.out.resolve())
        if args.restore_only and args.restore is not None:
            restore(args.restore, args.state.resolve())
        return 0
    wanted = {p.strip() for p in args.phases.split(",") if p.strip()}
    if not wanted or wanted - set(PHASES):
        parser.error(f"--phases takes {', '.join(PHASES)}")
    if args.build_jobs is not None:
        os.environ["DICE_BUILD_JOBS"] = str(args.build_jobs)
    deadline = time.monotonic() + args.budget_s
    out = args.state.resolve()
    if args.restore is not None and not out.exists():
        restore(args.restore, out)
    out.mkdir(parents=True, exist_ok=True)
    state_file = out / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {"seconds": {}, "complete": {}, "calls": 0}
    state["calls"] += 1
    folders = prepare(out, args.rate_problems)
    total = len(discover(shared_level1())[0])
    log = out / "dice-bench.log"
    phases = [
        ("controls", [str(folders["controls"]), "--solutions", str(CONTROLS)]),
        ("builtin", [str(folders["builtin"]), "--model", "builtin", "--candidates", "1"]),
        ("rate", [str(folders["rate"]), "--solutions", str(folders["rate-solutions"])]),
    ]
    for name, argv in phases:
        if name not in wanted:
            continue
        if state["complete"].get(name) or not any(folders[name].glob("*.py")):
            state["complete"][name] = True
            continue
        left = deadline - time.monotonic()
        if left < 20:
            break
        print(f"== phase {name}: {left:.0f} s left in this call; DICE_BUILD_JOBS="
              f"{os.environ.get('DICE_BUILD_JOBS', '(default)')}", flush=True)
        before = cpu_times()
        code, seconds = run_bench([*argv, "--out", str(out / name), "--resume", "--json"], log, left)
        after = cpu_times()
        state["seconds"][name] = state["seconds"].get(name, 0.0) + seconds
        if before is not None and after is not None:
            cpu = state.setdefault("cpu", {}).setdefault(name, [])
            busy_s, all_s = after[0] - before[0], after[1] - before[1]
            cpu.append({"seconds": round(seconds, 1), "busy_cpus": round(busy_s / seconds, 2) if seconds else None,
                        "busy_share": round(busy_s / all_s, 3) if all_s else None, "cpus": os.cpu_count(),
                        "build_jobs": os.environ.get("DICE_BUILD_JOBS", "default")})
        state["complete"][name] = code == 0
        state_file.write_text(json.dumps(state, indent=1))
        report(out, folders, state, total)
        if code is None:
            break
    if "alone" in wanted and all(state["complete"].get(n) for n, _ in phases) \
            and len(state.get("alone", [])) < RETIME_PROBLEMS and deadline - time.monotonic() > 60:
        print("== phase alone: dice profile of correct controls, nothing else running", flush=True)
        retime_alone(out, out / "controls", state, deadline)
        state_file.write_text(json.dumps(state, indent=1))
    report(out, folders, state, total)
    keep(out, args.out.resolve())
    return 0


STATE_ARCHIVE = "state.tar.gz"


def _kept(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """All of the state but the inputs (the next call makes them again from the shared problems
    and the controls) and the charts."""
    parts = Path(info.name).parts
    return None if "inputs" in parts[:2] or info.name.endswith(".png") else info


def keep(state: Path, target: Path) -> None:
    """The report, and the state (the log, each phase's results) as one archive, to `target`."""
    if target == state:
        return
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tarfile.open(target / STATE_ARCHIVE, "w:gz") as archive:
        archive.add(state, arcname="state", filter=_kept)
    for name in ("bench_level1.json", "bench_level1.md"):
        if (state / name).exists():
            shutil.copy(state / name, target / name)


def restore(archive: Path, state: Path) -> None:
    """An earlier call's state (keep's archive) as the folder `state`."""
    with tempfile.TemporaryDirectory() as unpacked:
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
        shutil.move(str(Path(unpacked) / "state"), str(state))


if __name__ == "__main__":
    sys.exit(main())
