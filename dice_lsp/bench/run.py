"""`dice bench`: KernelBench-style evaluation of a model (or of solution files) over a folder.

A run has two phases, both recorded in OUT/results.json after every problem so that
`--resume` can pick up where a stopped run ended:
1. generate: the model answers each problem with N candidates, decoded as one batch
   (or, with --solutions, the candidates are read from files);
2. judge: every candidate is spliced into its problem and judged by the profiler, in one
   worker process per GPU (profiler.judge's JudgePool) that builds every problem's candidates
   ahead on the CPU and times them in order on its GPU (profiler.judging.worker); each
   problem's phase (building, waiting for GPU, timing, done; without a GPU, building and loading) shows on stderr
   (dice_lsp.bench.progress) and each judged problem is saved at once.
Generating all problems before judging any keeps the model off the GPU while kernels are
being timed. One bad problem (unreadable, engine error, judge crash or timeout) is recorded
with its reason and the run goes on.

Then it prints a table per level (dice_lsp.bench.stats: problems, compiled, correct,
fast_1, fast_2, geometric-mean speedup, and the candidates not counted because their
measurement proves nothing; against eager PyTorch and, where it worked, torch.compile),
writes OUT/speedups.png and OUT/report.html (dice_lsp.bench.html_report), and with --json
prints the summary object.

`--protocol` (profiler.judging.protocol) says how candidates are judged: ours (dice-lsp) or DICE's
evaluation (dice), whose extraction also decides which answers are judged at all
(dice_lsp.bench.extraction). One results folder holds one protocol.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from dice_lsp.bench import results as bench_results
from dice_lsp.bench.extraction import fail_rejected
from dice_lsp.bench.problems import discover
from dice_lsp.bench.progress import JudgeProgress, verdict_words
from dice_lsp.bench.html_report import REPORT_FILE, write_report
from dice_lsp.bench.report import format_table, write_chart
from dice_lsp.bench.results import CandidateRecord, RunRecord, TaskRecord
from dice_lsp.bench.solutions import candidates_for, solution_files
from dice_lsp.bench.stats import EAGER, TORCH_COMPILE, Table, left_out, table
from dice_lsp.bench.tasks import InfillFileError, OptimizeTask, Task, infill_tasks
from profiler.judge import DEFAULT_PROTOCOL, ClusterUnavailable, JudgeJob, JudgePool, RayJudgePool, worker_slots
from profiler.judge import protocol as judging_protocol
from profiler.machine import settings
from profiler.sandbox.gpu_turn import GpuTurn, torch_device_key

if TYPE_CHECKING:
    from engine.types import Progress

DEFAULT_OUT = "dice-bench-out"
CHART_FILE = "speedups.png"
# Settings a resumed run must share with the run it continues.
RESUME_KEYS = ("mode", "model", "solutions", "candidates")


class BenchError(Exception):
    """The run cannot start; the message says why and what to do."""


@dataclass
class Plan:
    tasks: list[Task]
    settings: dict[str, Any]
    out_dir: Path
    notes: list[str]             # problems skipped before the run, for the report


def main(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        plan = make_plan(args)
        run = open_run(plan, resume=args.resume)
    except BenchError as exc:
        print(f"dice bench: {exc}", file=sys.stderr)
        return 2
    for note in plan.notes:
        print(f"dice bench: {note}", file=sys.stderr)
    try:
        generate(plan, run, args)
        judge(plan, run, time_limit=args.time_limit, judge_on=getattr(args, "judge", None), started=started)
    except BenchError as exc:
        print(f"dice bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ndice bench: stopped; continue with the same command and --resume "
              f"(results so far: {plan.out_dir / bench_results.RESULTS_FILE})", file=sys.stderr)
        return 130
    summary, tables = summarize(plan, run)
    bench_results.save(run, plan.out_dir)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(human_report(summary, tables))
    return 0


def make_plan(args: argparse.Namespace) -> Plan:
    if args.candidates < 1:
        raise BenchError("--candidates must be at least 1")
    notes: list[str] = []
    if args.infill:
        if args.solutions:
            raise BenchError("--solutions works on KernelBench problems, not with --infill")
        try:
            tasks: list[Task] = infill_tasks(Path(args.infill))
        except InfillFileError as exc:
            raise BenchError(str(exc)) from exc
    else:
        tasks = kernelbench_tasks(args, notes)
    if args.limit is not None:
        tasks = tasks[: max(0, args.limit)]
    settings = {
        "mode": "infill" if args.infill else "optimize",
        "source": str(args.infill or args.dir),
        "model": None if args.solutions else args.model,
        "solutions": str(Path(args.solutions).resolve()) if args.solutions else None,
        "candidates": None if args.solutions else args.candidates,   # with --solutions: the files
        "max_tokens": args.max_tokens,
        "preset": args.preset,
        "temperature": sampling_temperature(args),
        "protocol": args.protocol,
    }
    return Plan(tasks, settings, Path(args.out or DEFAULT_OUT), notes)


def kernelbench_tasks(args: argparse.Namespace, notes: list[str]) -> list[Task]:
    """The problems under DIR (those with a solution file, with --solutions); what was
    left out and why goes to `notes`."""
    if not args.dir:
        raise BenchError("say which folder of KernelBench problems to run (or --infill FILE.json)")
    if not Path(args.dir).exists():
        raise BenchError(f"{args.dir}: no such folder")
    problems, skipped = discover(Path(args.dir))
    notes += [f"skipped {s.path}: {s.reason}" for s in skipped]
    if not problems:
        raise BenchError(
            f"{args.dir}: no KernelBench-format problem found (a .py file defining "
            "class Model, get_inputs and get_init_inputs)"
        )
    tasks: list[Task] = [OptimizeTask.from_problem(p) for p in problems]
    if not args.solutions:
        return tasks
    solutions = solution_files(Path(args.solutions))
    with_files = [t for t in tasks if candidates_for(t.path, solutions)]
    if not with_files:
        raise BenchError(f"{args.solutions}: no solution file matches a problem in {args.dir}")
    if len(with_files) < len(tasks):
        notes.append(f"{len(tasks) - len(with_files)} problem(s) have no file in {args.solutions}; not run")
    return with_files


def sampling_temperature(args: argparse.Namespace) -> float | None:
    """The dice preset's own (None), as DICE's evaluation samples; under the default preset
    greedy for one candidate, sampled for several, or best of N would judge N copies of one
    answer."""
    if args.temperature is not None:
        return args.temperature
    if args.preset == "dice":
        return None
    return 0.0 if args.candidates == 1 else 0.7


def open_run(plan: Plan, *, resume: bool) -> RunRecord:
    results = plan.out_dir / bench_results.RESULTS_FILE
    if not resume:
        if results.exists():
            raise BenchError(f"{results} exists: pass --resume to continue that run, or choose another --out")
        return RunRecord(plan.settings)
    if not results.exists():
        return RunRecord(plan.settings)
    try:
        run = bench_results.load(plan.out_dir)
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot resume: {exc}") from exc
    # A run from before --protocol existed was judged by ours.
    was = run.settings.get("protocol") or DEFAULT_PROTOCOL
    if was != plan.settings["protocol"]:
        raise BenchError(f"cannot resume {results}: its verdicts were judged under protocol {was!r}, not "
                         f"{plan.settings['protocol']!r}, and one results folder holds one protocol's verdicts; "
                         f"pass --protocol {was} to continue it, or choose another --out")
    differing = [k for k in RESUME_KEYS if run.settings.get(k) != plan.settings.get(k)]
    if differing:
        was = ", ".join(f"{k}={run.settings.get(k)!r}" for k in differing)
        raise BenchError(f"cannot resume {results}: it was run with {was}; use the same settings or another --out")
    return run


class ProblemProgress:
    """Progress over problems on stderr: a bar when stderr is a terminal, else one line per
    finished problem (logs). `note` shows what the current problem is doing (bar only)."""

    def __init__(self, total: int, what: str) -> None:
        self.total, self.what, self.done = total, what, 0
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=what, unit="problem", file=sys.stderr)

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text[-60:])

    def advance(self, name: str) -> None:
        self.done += 1
        if self.bar is None:
            print(f"[{self.what} {self.done}/{self.total}] {name}", file=sys.stderr, flush=True)
            return
        self.note(name)
        self.bar.update(1)
        if self.done >= self.total:
            self.bar.close()


def generate(plan: Plan, run: RunRecord, args: argparse.Namespace) -> None:
    """Phase 1: candidates for every problem the run has none for yet."""
    todo = [t for t in plan.tasks if t.name not in run.tasks]
    if not todo:
        return
    progress = ProblemProgress(len(todo), "loading solutions" if args.solutions else "generating")
    make_candidates = (solution_candidates(args.solutions) if args.solutions
                       else model_candidates(plan, args, progress))

    def attempt(task: Task) -> TaskRecord:
        progress.note(task.name)
        try:
            return TaskRecord(task.name, task.level, task.path, "generated", make_candidates(task))
        except BenchError:
            raise
        except Exception as exc:  # one problem's engine failure is that problem's result
            return TaskRecord(task.name, task.level, task.path, "error", error=f"generation failed: {exc}")

    # An engine that serves many requests at once (an SGLang server or router) gets that many
    # problems in flight; each is recorded in the run's order as it finishes.
    in_flight = getattr(make_candidates, "in_flight", 1)
    pool = ThreadPoolExecutor(in_flight, thread_name_prefix="dice-bench-generate") if in_flight > 1 else None
    records = pool.map(attempt, todo) if pool is not None else map(attempt, todo)
    try:
        for task, record in zip(todo, records):
            run.tasks[task.name] = record
            bench_results.save(run, plan.out_dir)
            progress.advance(task.name)
    finally:
        if pool is not None:
            # Stopped (Ctrl-C) or failed: the requests in flight are cancelled, not waited for.
            getattr(make_candidates, "stop", lambda: None)()
            pool.shutdown(wait=False, cancel_futures=True)


def model_candidates(plan: Plan, args: argparse.Namespace,
                     progress: ProblemProgress) -> Callable[[Task], list[CandidateRecord]]:
    from engine.types import Cancelled

    engine = load_engine(args.model)
    options: dict[str, Any] = {"preset": plan.settings["preset"]}
    if plan.settings["temperature"] is not None:
        options["temperature"] = plan.settings["temperature"]
    if args.max_tokens is not None:
        options["max_tokens"] = args.max_tokens

    gpu = local_gpu(engine)

    def make(task: Task) -> list[CandidateRecord]:
        def on_progress(p: Progress) -> None:
            progress.note(f"{task.name}: {p.phase} block {p.block}/{p.blocks}, {p.tokens} tokens")

        # Each problem's decoding holds the GPU's turn: nothing of an editor's is timed beside it.
        turn = GpuTurn(gpu) if gpu is not None else None
        try:
            if turn is not None and not turn.try_acquire():
                progress.note(f"{task.name}: waiting for the GPU (candidates are being timed on it)")
                if not turn.acquire(stopping.is_set):
                    raise Cancelled("stopped while waiting for the GPU")
            return [
                CandidateRecord(
                    text=c.text,
                    generation={"tokens": c.tokens, "steps": c.steps, "seconds": round(c.seconds, 3),
                                "finish_reason": c.finish_reason, "extraction": c.extraction},
                )
                for c in task.generate(engine, plan.settings["candidates"], **options, on_progress=on_progress,
                                       should_cancel=stopping.is_set)
            ]
        finally:
            if turn is not None:
                turn.release()

    stopping = threading.Event()
    make.in_flight = getattr(engine, "parallel_requests", 1)  # type: ignore[attr-defined]
    make.stop = stopping.set  # type: ignore[attr-defined]
    return make


def local_gpu(engine: Any) -> str | None:
    """The GPU (profiler.sandbox.gpu_turn) a model of this process decodes on, or None."""
    from engine.decoding.local import LocalEngine

    return torch_device_key(engine.info().device) if isinstance(engine, LocalEngine) else None


def load_engine(spec: str) -> Any:
    import engine
    from engine.types import EngineError

    try:
        return engine.load(spec, memory=settings.current().engine_memory)
    except EngineError as exc:
        raise BenchError(f"cannot load model {spec!r}: {exc}") from exc


def solution_candidates(folder: str) -> Callable[[Task], list[CandidateRecord]]:
    solutions = solution_files(Path(folder))

    def read(task: Task) -> list[CandidateRecord]:
        return [
            CandidateRecord(text=path.read_text(encoding="utf-8"), generation={"file": str(path.resolve())})
            for path in candidates_for(task.path, solutions)
        ]

    return read


def judge(plan: Plan, run: RunRecord, *, time_limit: float, judge_on: str | None = None,
          started: float | None = None) -> None:
    """Phase 2: judge every generated problem, in worker processes that build ahead and time
    in order (profiler.judge's JudgePool); each problem is saved as soon as it is judged. `started`:
    when the run began (time.monotonic), for the rate the progress shows."""
    todo = [t for t in plan.tasks if run.tasks[t.name].state == "generated"]
    protocol = judging_protocol(plan.settings["protocol"])
    jobs: list[tuple[Task, list[str]]] = []
    for task in todo:
        record = run.tasks[task.name]
        fail_rejected(record.candidates, protocol)  # answers the protocol does not judge
        try:
            # Identical candidates are judged once: the verdict would be the same.
            documents = list(dict.fromkeys(task.document(c.text) for c in record.candidates if c.verdict is None))
        except Exception as exc:  # e.g. a problem file edited into nonsense before a resume
            record.state, record.error = "error", f"cannot put the candidates into the problem: {exc}"
            continue
        if not documents:
            record.state = "done"
            continue
        jobs.append((task, documents))
    if not jobs:
        return
    import profiler

    # A Ray cluster's GPUs are its own; on this machine, whether the profiler sees one.
    progress = JudgeProgress([task.name for task, _ in jobs], gpu=bool(judge_on) or profiler.gpu_name() is not None,
                             started=started)
    pool = judge_pool(judge_on)
    with pool:
        answers = pool.judge_all([JudgeJob(t.baseline, d, t.path, time_limit, protocol.name) for t, d in jobs],
                                 on_phase=lambda index, phase: progress.phase(jobs[index][0].name, phase))
        for index, answer in answers:
            task, documents = jobs[index]
            record = run.tasks[task.name]
            try:
                if isinstance(answer, Exception):
                    raise answer
                record_answer(task, record, documents, answer)
            except Exception as exc:  # one problem's judge failure is that problem's result
                record.state, record.error = "error", f"judging failed: {exc}"
            bench_results.save(run, plan.out_dir)
            judged = [c.verdict for c in record.candidates if c.verdict is not None]
            progress.done(task.name, len(documents), verdict_words(judged, record.error))
    progress.close()


def judge_pool(judge_on: str | None) -> Any:
    """The workers that judge: one per GPU of this machine, or a Ray cluster's (`--judge`,
    profiler.judge's RayJudgePool), which answer alike."""
    if not judge_on:
        return JudgePool(worker_slots())
    try:
        return RayJudgePool(judge_on)
    except ClusterUnavailable as exc:
        raise BenchError(str(exc)) from exc


def record_answer(task: Task, record: TaskRecord, documents: list[str], answer: dict[str, Any]) -> None:
    """A worker's answer into the problem's record: the verdict of each candidate that was
    judged (those without one yet), the profile."""
    verdict_of = dict(zip(documents, answer["verdicts"]))
    judged = [i for i, c in enumerate(record.candidates) if c.verdict is None]
    for i in judged:
        record.candidates[i].verdict = verdict_of[task.document(record.candidates[i].text)]
    if answer["profile"] is not None:
        best_text = documents[answer["profile"]["candidate"]]
        index = next(i for i in judged if task.document(record.candidates[i].text) == best_text)
        record.profile = {**answer["profile"], "candidate": index}
    record.state = "done"


def machine_gpu(run: RunRecord) -> str | None:
    """The GPU the verdicts were measured on, else the one this machine has (or None)."""
    for record in run.tasks.values():
        for candidate in record.candidates:
            if candidate.verdict and candidate.verdict.get("gpu"):
                return candidate.verdict["gpu"]
    import profiler

    return profiler.gpu_name()


def summarize(plan: Plan, run: RunRecord) -> tuple[dict[str, Any], list[Table]]:
    """The summary object (also stored in results.json) and the tables it holds."""
    records = [run.tasks[t.name] for t in plan.tasks if t.name in run.tasks]
    gpu = machine_gpu(run)
    tables = [t for t in (table(records, gpu, EAGER), table(records, gpu, TORCH_COMPILE)) if t]
    chart = write_chart(records, gpu, plan.out_dir / CHART_FILE)
    run.summary = {
        **{k: plan.settings[k] for k in ("mode", "source", "model", "solutions", "candidates", "protocol")},
        "gpu": gpu,
        "problems": len(records),
        "most_candidates": max((len(r.candidates) for r in records), default=0),
        "errors": [{"name": r.name, "error": r.error} for r in records if r.state == "error"],
        "not_counted": not_counted_candidates(records),
        "baseline": baseline_words(plan),
        "torch_compile": "timed" if len(tables) > 1 else "not timed (no GPU, or torch.compile failed)",
        "tables": [t.to_json() for t in tables],
        "results": str(plan.out_dir / bench_results.RESULTS_FILE),
        "chart": str(chart),
        "report": str(plan.out_dir / REPORT_FILE),
    }
    write_report(records, run.summary, tables, plan.out_dir / REPORT_FILE)
    return run.summary, tables


def not_counted_candidates(records: list[TaskRecord]) -> list[dict[str, Any]]:
    """Each candidate measured but left out of the tables, with why (dice_lsp.bench.stats)."""
    return [
        {"name": r.name, "candidate": i, "reason": reason, "message": c.verdict.get("message", "")}
        for r in records if r.state == "done"
        for i, c in enumerate(r.candidates)
        if c.verdict is not None and (reason := left_out(c.verdict)) is not None
    ]


def baseline_words(plan: Plan) -> str:
    if plan.settings["mode"] == "infill":
        return "the document with its true middle (eager Model for KernelBench records)"
    return "eager PyTorch (Model)"


def human_report(summary: dict[str, Any], tables: list[Table]) -> str:
    model = f"solutions in {summary['solutions']}" if summary["solutions"] else summary["model"]
    blocks = []
    for t in tables:
        words = summary["baseline"] if t.baseline == EAGER else "torch.compile(Model)"
        blocks.append(format_table(t, gpu=summary["gpu"], candidates=summary["most_candidates"], model=model,
                                   baseline=words, protocol=summary["protocol"]))
    if summary["torch_compile"] != "timed":
        blocks.append(f"torch.compile baseline: {summary['torch_compile']}")
    if summary["not_counted"]:
        blocks.append(f"{len(summary['not_counted'])} candidate(s) not counted (their measurement proves nothing):")
        blocks += [f"  {n['name']} candidate {n['candidate'] + 1}: {n['reason']}: {n['message'][:160]}"
                   for n in summary["not_counted"]]
    if summary["errors"]:
        blocks.append(f"{len(summary['errors'])} problem(s) failed:")
        blocks += [f"  {e['name']}: {e['error']}" for e in summary["errors"]]
    blocks.append(f"results: {summary['results']}\nchart:   {summary['chart']}\nreport:  {summary['report']}")
    return "\n\n".join(blocks)
