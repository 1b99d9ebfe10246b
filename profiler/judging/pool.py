"""Judging many problems in worker processes, one per GPU (`dice bench`'s judge pool).

Each worker (`python -m profiler.judging.worker`) gets its share of the problems at once and
runs them as a pipeline: builds of all its problems' candidates on the CPU ahead, judging
in order on its GPU (see the worker for the pipeline). This side
- pins each worker to one GPU through CUDA_VISIBLE_DEVICES, inherited by the profiler's
  sandbox processes, so that two problems are never timed on the same GPU at once;
- bounds each problem with a wall-clock limit from the moment its GPU work starts (what the
  profiler itself allows its sandbox runs, plus a margin) and stops the worker when it is
  exceeded, so a hang anywhere, even in the profiler's parent side, costs one problem,
  never the run: the worker's other problems go to a fresh worker;
- passes on each problem's phase (building, waiting for GPU, timing) for the progress display.
The number of workers is the number of visible GPUs, capped by a CPU budget (building
load_inline extensions is CPU-heavy); without a GPU only compiling happens, on the CPU
budget alone.
"""

from __future__ import annotations

import collections
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from profiler.judging.problem import BUILD_JOBS_ENV, build_jobs, half_the_cpus
from profiler.judging.protocol import DEFAULT as DEFAULT_PROTOCOL
from profiler.sandbox import BUILD_LIMIT_S

# The worker must import this checkout's packages whatever the current folder is.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
WORKER_MODULE = "profiler.judging.worker"
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
    protocol: str = DEFAULT_PROTOCOL   # profiler.judging.protocol's name: how strictly to judge

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

    @property
    def stopped(self) -> bool:
        return self._stopped

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
    as profiler.judging.worker answers it (JudgeError when it could not). The process sits in
    `live` while it runs, so that a stopped run can kill it."""
    for _, answer in JudgePool([gpu], live).judge_all([job]):
        if isinstance(answer, Exception):
            raise answer
        return answer
    raise JudgeError("the judge worker answered nothing")


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


PhaseFn = Callable[[int, str], None]  # on_phase(index of the job, phase)


class Worker:
    """One worker process and its share of the jobs (by index into the run's job list)."""

    def __init__(self, slot: str | None, jobs: dict[int, JudgeJob], events: queue.Queue, live: LiveWorkers,
                 build_jobs: int) -> None:
        self.slot, self.jobs = slot, dict(jobs)     # jobs not answered yet
        self.current: tuple[int, float] | None = None   # (job on the GPU now, its deadline)
        self.answered = 0
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        env[BUILD_JOBS_ENV] = str(build_jobs)
        if slot is not None:
            env["CUDA_VISIBLE_DEVICES"] = slot
        self.folder = tempfile.mkdtemp(prefix="dice-bench-judge-")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE],
            env=env,
            cwd=self.folder,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, killed as a whole on timeout
        )
        self.stderr: collections.deque[str] = collections.deque(maxlen=8)
        try:
            live.add(self.proc)
        except JudgeError:
            self.close()
            raise
        threading.Thread(target=self._talk, args=(events,), daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _talk(self, events: queue.Queue) -> None:
        try:
            for index, job in self.jobs.items():
                self.proc.stdin.write(json.dumps({"id": index, **asdict(job)}) + "\n")
            self.proc.stdin.close()
        except OSError:
            pass  # it died already; its exit says why
        for line in self.proc.stdout:
            try:
                events.put((self, json.loads(line)))
            except ValueError:
                self.stderr.append(f"not an event: {line[:200]}")
        self.proc.wait()
        events.put((self, None))

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            if line.strip():
                self.stderr.append(line.rstrip())

    def why_it_ended(self) -> str:
        return f"judge worker exited with code {self.proc.returncode}: " + " | ".join(self.stderr)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class JudgePool:
    """Runs JudgeJobs on a fixed set of worker slots, one worker process per slot."""

    def __init__(self, slots: list[str | None], live: LiveWorkers | None = None) -> None:
        self.slots = slots
        self.size = len(slots)
        self.live = live or LiveWorkers()

    def judge_all(self, jobs: list[JudgeJob], on_phase: PhaseFn | None = None) -> Iterator[tuple[int, Any]]:
        """(index of the job, its answer or a JudgeError), in the order they finish. Jobs are
        dealt to the slots in turn, so that each GPU's worker takes them in the given order."""
        events: queue.Queue = queue.Queue()
        builds = max(1, build_jobs(sum(len(j.documents) for j in jobs)) // max(1, self.size))
        workers: list[Worker] = []

        def start(slot: str | None, share: dict[int, JudgeJob]) -> list[tuple[int, Any]]:
            """A worker for `share`; the jobs' errors when none can start (the run was stopped)."""
            if not share:
                return []
            try:
                workers.append(Worker(slot, share, events, self.live, builds))
            except JudgeError as exc:
                return [(i, exc) for i in share]
            return []

        try:
            for n, slot in enumerate(self.slots):
                yield from start(slot, {i: job for i, job in enumerate(jobs) if i % self.size == n})
            while any(w.jobs for w in workers):
                timing = [w.current[1] for w in workers if w.current is not None and w.jobs]
                try:
                    worker, event = events.get(timeout=max(0.0, min(timing) - time.monotonic()) if timing else None)
                except queue.Empty:
                    for worker in [w for w in workers if w.current and w.current[1] <= time.monotonic()]:
                        index = worker.current[0]
                        stop_workers([worker.proc])
                        worker.proc.wait()
                        deadline = worker.jobs.pop(index).deadline
                        yield index, JudgeError(f"judging took longer than {deadline:.0f} s and was stopped")
                        self._retire(worker, workers)
                        yield from start(worker.slot, worker.jobs)  # the rest, in a fresh worker
                        worker.jobs = {}
                    continue
                if event is None:
                    if worker.jobs:
                        yield from self._ended(worker)
                        if worker.answered and not self.live.stopped:
                            yield from start(worker.slot, worker.jobs)
                        else:
                            yield from ((i, JudgeError(worker.why_it_ended())) for i in worker.jobs)
                        worker.jobs = {}
                    self._retire(worker, workers)
                    continue
                index = event["id"]
                if index not in worker.jobs:
                    continue  # a job already given up (stopped at its deadline)
                if "phase" in event:
                    if event["phase"] == "timing":
                        worker.current = (index, time.monotonic() + worker.jobs[index].deadline)
                    if on_phase is not None:
                        on_phase(index, event["phase"])
                    continue
                job = worker.jobs.pop(index)
                worker.answered += 1
                if worker.current and worker.current[0] == index:
                    worker.current = None
                yield index, self._answer(job, event)
        finally:
            for worker in workers:
                worker.close()

    @staticmethod
    def _answer(job: JudgeJob, event: dict) -> Any:
        if "error" in event:
            return JudgeError(f"judging failed in the worker: {event['error']}")
        answer = event["answer"]
        if len(answer["verdicts"]) != len(job.documents):
            return JudgeError(f"judge returned {len(answer['verdicts'])} verdicts for {len(job.documents)} candidates")
        return answer

    def _ended(self, worker: Worker) -> Iterator[tuple[int, Any]]:
        """A worker that exited with jobs left: the one it was judging (else its next) failed."""
        index = worker.current[0] if worker.current else next(iter(worker.jobs))
        worker.jobs.pop(index)
        yield index, JudgeError(worker.why_it_ended())

    def _retire(self, worker: Worker, workers: list[Worker]) -> None:
        """Forget a worker that ended or was stopped (its exit may still be on the queue)."""
        self.live.discard(worker.proc)
        worker.close()
        if worker in workers:
            workers.remove(worker)

    def __enter__(self) -> "JudgePool":
        return self

    def __exit__(self, exc_type: type | None, *exc: object) -> None:
        if exc_type is not None:
            # Stopped (Ctrl-C) or failed: the workers are in their own sessions, so the
            # signal did not reach them; end them instead of waiting out their problems,
            # and start no further worker meanwhile.
            stop_workers(self.live.stop())
