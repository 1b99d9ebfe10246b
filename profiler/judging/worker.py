"""The judge worker of `dice bench`: `python -m profiler.judging.worker`, one per GPU.

stdin: the worker's JudgeJobs, one JSON object a line ({"id": ID, **JudgeJob}), read to its
end before any work starts. stdout: events, one JSON object a line:
    {"id": ID, "phase": "building" | "waiting for GPU" | "timing"}
    {"id": ID, "answer": {"verdicts": [Verdict.to_json()...], "profile": {...} | None}}
    {"id": ID, "error": "why the problem could not be judged"}
The profiler runs every candidate in its own sandbox; this process exists so that the bench
can pin it to one GPU, bound each problem with a wall-clock limit and stop it as a whole
(profiler.judging.pool).

KernelBench problems are judged by the profiler's KernelBench schedule
(profiler.judging.schedule), as the editor's are, with the builds of every problem started
at once and overlapping the GPU steps (stopped while a run measures), and torch.compile(Model)
timed for each problem's best correct candidate; a `.cu` problem is judged as profiler.judge
does (cuda_verdicts).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any


class Events:
    """Writes events to the bench (stdout), one line each, from any thread; each problem's
    phase only moves forward."""

    ORDER = ("queued", "building", "waiting for GPU", "timing")

    def __init__(self, stream) -> None:
        self.stream, self.lock = stream, threading.Lock()
        self.phases: dict[Any, str] = {}

    def send(self, message: dict) -> None:
        with self.lock:
            self.stream.write(json.dumps(message) + "\n")
            self.stream.flush()

    def phase(self, job_id: Any, phase: str) -> None:
        with self.lock:
            now = self.phases.get(job_id, "queued")
            if self.ORDER.index(phase) <= self.ORDER.index(now):
                return
            self.phases[job_id] = phase
        self.send({"id": job_id, "phase": phase})


class Pipeline:
    """The worker's jobs: KernelBench problems through one schedule (builds ahead on the CPU,
    judging in order on the GPU), `.cu` problems judged in their turn."""

    def __init__(self, jobs: list[dict], events: Events) -> None:
        from profiler.judging.problem import build_jobs
        from profiler.judging.schedule import KernelBenchSchedule

        self.jobs, self.events = jobs, events
        self.stopping = threading.Event()
        self.schedule = KernelBenchSchedule(
            overlap=True, compile_best=True, build_workers=build_jobs(sum(len(j["documents"]) for j in jobs)),
            should_cancel=self.stopping.is_set, on_problem_phase=events.phase)
        self.pause = self.schedule.pause
        self.unplanned: dict[Any, Exception] = {}  # problems the schedule could not take, and why

    def run(self) -> None:
        from profiler.sandbox import Cancelled
        from profiler.source.document import is_kernelbench

        for job in self.jobs:
            if not is_kernelbench(job["path"]):
                self.events.phase(job["id"], "waiting for GPU")
                continue
            try:
                self.schedule.add(job["id"], job["baseline"], job["path"], job["time_limit"], job["documents"],
                                  _protocol(job))
            except Exception as exc:  # noqa: BLE001 - one problem's failure is that problem's result
                self.unplanned[job["id"]] = exc
        for job in self.jobs:
            if self.stopping.is_set():
                return
            try:
                answer = self._judge(job)
            except Cancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - one problem's failure is that problem's result
                self.events.send({"id": job["id"], "error": f"{type(exc).__name__}: {exc}"})
                continue
            self.events.send({"id": job["id"], "answer": answer})

    def _judge(self, job: dict) -> dict:
        from profiler.judging.cuda import cuda_verdicts
        from profiler.source.document import is_kernelbench

        if job["id"] in self.unplanned:
            raise self.unplanned[job["id"]]
        if not is_kernelbench(job["path"]):
            self.events.phase(job["id"], "timing")
            # a .cu document is judged by our protocol whatever the job names (profiler.judge)
            verdicts = cuda_verdicts(job["baseline"], list(job["documents"]), job["path"], None, job["time_limit"],
                                     None, self.stopping.is_set)
            return {"verdicts": [v.to_json() for v in verdicts], "profile": None}
        judged = self.schedule.judge(job["id"])
        profiled = None
        if judged.profile is not None:
            best, verdict = judged.profile
            profiled = {"candidate": best, "verdict": verdict.to_json()}
        return {"verdicts": [v.to_json() for v in judged.verdicts], "profile": profiled}

    def close(self) -> None:
        """Stop what is left (builds see should_cancel) and let paused builds go, to end."""
        self.stopping.set()
        self.schedule.close()


def _protocol(job: dict) -> Any:
    from profiler.judging.protocol import protocol

    return protocol(job.get("protocol"))


def hard_deadline(jobs: list[dict]) -> float:
    """Seconds after which the worker kills itself whatever it is doing: twice what its
    problems may take on the GPU (builds ahead run beside them)."""
    from profiler.judging.pool import JudgeJob

    return 2 * sum(JudgeJob(**{k: v for k, v in j.items() if k != "id"}).deadline for j in jobs)


def main(argv: list[str]) -> int:
    if argv:
        print("usage: python -m profiler.judging.worker < JOBS.jsonl  (one JudgeJob a line)", file=sys.stderr)
        return 2
    jobs = [json.loads(line) for line in sys.stdin if line.strip()]
    events = Events(sys.stdout)
    sys.stdout = sys.stderr  # stdout carries events only: a stray print goes to the log
    from profiler.run.harness import die_with_parent

    # This process has a session of its own (so that it can be stopped as a group): should
    # `dice bench` be killed outright (SIGTERM, SIGKILL, a closed terminal), it dies too,
    # and its sandboxes with it, instead of judging on, on a GPU someone else now times on.
    die_with_parent(hard_deadline(jobs))
    pipeline = Pipeline(jobs, events)
    try:
        pipeline.run()
    finally:
        pipeline.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
