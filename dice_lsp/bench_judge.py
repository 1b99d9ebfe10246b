"""Judging the problems of a bench run in parallel worker processes, one GPU each.

Each problem is judged by `profiler.judge` inside its own worker process
(`python -m dice_lsp.bench_worker`), which:
- pins the worker to one GPU through CUDA_VISIBLE_DEVICES, inherited by the profiler's
  sandbox processes, so that two problems are never timed on the same GPU at once;
- bounds the whole problem with a wall-clock limit (what the profiler itself allows its
  sandbox runs, plus a margin) and stops the worker when it is exceeded, so a hang
  anywhere, even in the profiler's parent side, costs one problem, never the run.
The number of workers is the number of visible GPUs, capped by a CPU budget (building
load_inline extensions is CPU-heavy); without a GPU only compiling happens, on the CPU
budget alone.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from profiler.judge import half_the_cpus
from profiler.sandbox import BUILD_LIMIT_S

import dice_lsp

# The worker must import this checkout's packages whatever the current folder is.
PACKAGE_ROOT = str(Path(dice_lsp.__file__).resolve().parent.parent)
# Seconds an interrupted worker gets to end its sandbox before it is killed.
STOP_GRACE_S = 10.0
# Seconds granted to a problem on top of its candidates' own limits: loading the worker
# and the profiler's own start-up.
PROBLEM_OVERHEAD_S = 120.0


class JudgeError(Exception):
    """A problem could not be judged at all (worker hung, died or answered nothing)."""


@dataclass(frozen=True)
class JudgeJob:
    baseline: str          # the document candidates are judged against
    documents: list[str]   # one whole document per candidate
    path: str              # its suffix tells the profiler the kind (.py KernelBench, .cu spec)
    time_limit: float      # seconds per candidate, as profiler.judge takes it

    @property
    def deadline(self) -> float:
        # Sandbox runs: each candidate, then profile() of the best one (itself and
        # torch.compile(Model)); the profiler gives each its limit plus time to build.
        runs = len(self.documents) + 2
        return runs * (self.time_limit + BUILD_LIMIT_S) + PROBLEM_OVERHEAD_S


def visible_gpus() -> list[str]:
    """GPU ids a worker can be pinned to: CUDA_VISIBLE_DEVICES when set, else those
    nvidia-smi lists. Asked of nvidia-smi, not CUDA, so this process never creates a
    CUDA context of its own."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def worker_slots(cpu_budget: int | None = None) -> list[str | None]:
    """One slot per worker: a GPU id, or None (compile only) when there is no GPU."""
    budget = cpu_budget or half_the_cpus()
    gpus = visible_gpus()
    return list(gpus[:budget]) if gpus else [None] * budget


class LiveWorkers:
    """The worker processes running now. Once stopped it takes no more: a worker started
    after the stop (by a thread that was just then starting the next problem) is killed at
    once, so that Ctrl-C never waits out a problem that began after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self._stopped = False

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            if not self._stopped:
                self._procs.add(proc)
                return
        _signal_group(proc, signal.SIGKILL)
        proc.wait()
        raise JudgeError("the run was stopped")

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop(self) -> list[subprocess.Popen]:
        """Take no more workers; the ones running now, for stop_workers."""
        with self._lock:
            self._stopped = True
            return list(self._procs)


def run_worker(job: JudgeJob, gpu: str | None, live: LiveWorkers | None = None) -> dict[str, Any]:
    """profiler.judge(job) in a fresh worker process: {"verdicts": [...], "profile": ...}
    as dice_lsp.bench_worker writes it. The process sits in `live` while it runs, so that
    a stopped run can kill it."""
    with tempfile.TemporaryDirectory(prefix="dice-bench-judge-") as tmp:
        request, result = Path(tmp, "request.json"), Path(tmp, "verdicts.json")
        request.write_text(json.dumps(asdict(job)), encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        proc = subprocess.Popen(
            [sys.executable, "-m", "dice_lsp.bench_worker", str(request), str(result)],
            env=env,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, killed as a whole on timeout
        )
        if live is not None:
            live.add(proc)
        try:
            _, stderr = proc.communicate(timeout=job.deadline)
        except subprocess.TimeoutExpired:
            stop_workers([proc])
            proc.communicate()
            raise JudgeError(f"judging took longer than {job.deadline:.0f} s and was stopped") from None
        finally:
            if live is not None:
                live.discard(proc)
        if proc.returncode != 0 or not result.exists():
            tail = (stderr or "").strip().splitlines()[-8:]
            raise JudgeError(f"judge worker exited with code {proc.returncode}: " + " | ".join(tail))
        answer = json.loads(result.read_text(encoding="utf-8"))
    if len(answer["verdicts"]) != len(job.documents):
        raise JudgeError(f"judge returned {len(answer['verdicts'])} verdicts for {len(job.documents)} candidates")
    return answer


def stop_workers(procs: list[subprocess.Popen], grace_s: float = STOP_GRACE_S) -> None:
    """Interrupt workers (SIGINT to their process groups), so that the profiler's own clean-up
    kills its sandbox processes, which live in sessions of their own; SIGKILL what is left
    after the grace period."""
    for proc in procs:
        _signal_group(proc, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    for proc in procs:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


class JudgePool:
    """Runs JudgeJobs on a fixed set of worker slots, at most one job per slot at a time."""

    def __init__(self, slots: list[str | None]) -> None:
        self.slots: queue.Queue[str | None] = queue.Queue()
        for slot in slots:
            self.slots.put(slot)
        self.size = len(slots)
        # Threads only wait on worker processes; the work itself happens in those.
        self.executor = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="dice-bench-judge")
        self.live = LiveWorkers()

    def submit(self, job: JudgeJob) -> Future:
        return self.executor.submit(self._run, job)

    def _run(self, job: JudgeJob) -> dict[str, Any]:
        slot = self.slots.get()
        try:
            return run_worker(job, slot, self.live)
        finally:
            self.slots.put(slot)

    def __enter__(self) -> "JudgePool":
        return self

    def __exit__(self, exc_type: type | None, *exc: object) -> None:
        if exc_type is not None:
            # Stopped (Ctrl-C) or failed: the workers are in their own sessions, so the
            # signal did not reach them; end them instead of waiting out their problems,
            # and start no queued problem meanwhile.
            running = self.live.stop()
            self.executor.shutdown(wait=False, cancel_futures=True)
            stop_workers(running)
        self.executor.shutdown(wait=True, cancel_futures=True)
