"""The judge worker of `dice bench`: `python -m dice_lsp.bench.worker`, one per GPU.

stdin: the worker's JudgeJobs, one JSON object a line ({"id": ID, **JudgeJob}), read to its
end before any work starts. stdout: events, one JSON object a line:
    {"id": ID, "phase": "building" | "waiting for GPU" | "timing"}
    {"id": ID, "answer": {"verdicts": [Verdict.to_json()...], "profile": {...} | None}}
    {"id": ID, "error": "why the problem could not be judged"}
The profiler runs every candidate in its own sandbox; this process exists so that the bench
can pin it to one GPU, bound each problem with a wall-clock limit and stop it as a whole
(dice_lsp.bench.judge).

The pipeline (KernelBench problems; a `.cu` problem is judged as profiler.judge does):
- CPU: every problem's candidates are built from the start, in problem order, by a pool of
  build threads whose sandboxes run at nice NICE, the first problem's at FIRST_NICE (GPU
  hidden, as profiler.judge builds ahead); what a build does decides nothing, its judging
  run finds it or builds again;
- GPU, one problem after the other: Model alone once (the reference every candidate's run
  must agree with), then each candidate as soon as its build is done, then, for the best
  correct candidate, torch.compile(Model) once (the second baseline, `profile`); where
  sandboxes are isolated, each of these starts its sandbox while the step before it runs
  (pre-started spares; KernelBenchProblem.prestart for a candidate's);
- while a GPU run is past its start-up (loading, checks, timing), the build processes are
  stopped (SIGSTOP, SIGCONT after it), so that the run has the machine to itself.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

# Niceness of the build sandboxes (inherited by their compilers); also how they are found
# to be paused. The first problem's builds run at FIRST_NICE: nothing can be timed before one
# of them is done, and 12 builds sharing the CPUs took 90 s where one alone takes 60 (H200,
# 16 CPUs); the later problems' builds, at NICE, take what the first leave.
NICE = 19
FIRST_NICE = 10
BUILD_NICES = (FIRST_NICE, NICE)
# Phases of a GPU run during which builds may go on: nothing of it is on the GPU yet, or
# torch.compile is compiling (CPU). From any other phase to the end of the run they stop.
# A pre-started sandbox (profiler.sandbox.pool) reports its warm-up phases at its claim.
BUILDS_MAY_RUN = ("start-up", "warm-up", "ready", "load baseline", "compile", "compile baseline", "torch.compile")
# Names a folder of build processes beside this worker (builders_beside).
BUILDERS_ENV = "DICE_BUILDERS_DIR"
# How often stopped builds are looked for again (a build thread may start one meanwhile).
RESCAN_S = 0.5


def best_correct(verdicts: list[Any]) -> int | None:
    """Index of the proven correct, timed candidate with the largest speedup (a verdict whose
    measurement proves nothing is not profiled: it does not count in the tables)."""
    timed = [(v.speedup, i) for i, v in enumerate(verdicts) if v.proven and v.correct and v.speedup is not None]
    return max(timed)[1] if timed else None


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


def builders_beside() -> list[int]:
    """Processes of this machine, outside this worker, whose builds stop too while a run
    measures: Ray's build tasks (dice_lsp.bench.ray_judge), each an empty file named by its
    process id in the folder BUILDERS_ENV names."""
    folder = os.environ.get(BUILDERS_ENV)
    try:
        return [int(name) for name in os.listdir(folder)] if folder else []
    except (OSError, ValueError):
        return []


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, nice) of a process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[16])


class BuildPause:
    """Stops the niced build processes below this one while held (a GPU run measures), and
    lets them go on when released. The build sandboxes' keepers (this process's children)
    are left running, so that a sandbox's time limit can still end its build."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopped: set[int] = set()
        self.held = threading.Event()
        self.closed = False
        self.rescan = threading.Thread(target=self._rescan, daemon=True, name="dice-build-pause")
        self.rescan.start()

    def on_phase(self, phase: str) -> None:
        """A GPU run's phase (run_sandboxed's on_phase)."""
        if phase in BUILDS_MAY_RUN:
            self.release()
        else:
            self.hold()

    def hold(self) -> None:
        self.held.set()
        self._stop_builds()

    def release(self) -> None:
        self.held.clear()
        with self.lock:
            for pid in self.stopped:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            self.stopped.clear()

    def close(self) -> None:
        self.closed = True
        self.release()

    def _stop_builds(self) -> None:
        from profiler.sandbox.keeper import descendants

        me = os.getpid()
        with self.lock:
            if not self.held.is_set():
                return
            for builder in (me, *builders_beside()):
                for pid in descendants(builder):
                    facts = _stat(pid)
                    if facts is None or pid in self.stopped or facts[0] == builder or facts[1] not in BUILD_NICES:
                        continue
                    try:
                        os.kill(pid, signal.SIGSTOP)
                        self.stopped.add(pid)
                    except (ProcessLookupError, PermissionError):
                        pass

    def _rescan(self) -> None:
        while not self.closed:
            self.held.wait()
            if self.closed:
                return
            self._stop_builds()
            threading.Event().wait(RESCAN_S)


def _nice_this_thread(nice: int) -> None:
    """This build thread runs at `nice` (or lower in priority already: a thread's niceness
    only goes up without privileges), and so does every process it starts (Linux: a
    thread's own priority, inherited by its children). The first problem's builds are
    submitted first, so each runs on a thread that has built nothing yet."""
    me = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, me, max(nice, os.getpriority(os.PRIO_PROCESS, me)))


class Pipeline:
    """The worker's jobs: builds ahead on the CPU, judging in order on the GPU."""

    def __init__(self, jobs: list[dict], events: Events) -> None:
        from profiler.judge import build_jobs

        self.jobs, self.events = jobs, events
        self.stopping = threading.Event()
        self.pause = BuildPause()
        self.problems: dict[Any, Any] = {}
        self.builds: dict[Any, dict[str, Future]] = {}
        total = sum(len(j["documents"]) for j in jobs)
        self.pool = ThreadPoolExecutor(build_jobs(total), thread_name_prefix="dice-bench-build")
        self.first_builds = True  # the first KernelBench problem's builds are being planned

    def run(self) -> None:
        import profiler

        for job in self.jobs:
            if profiler.is_kernelbench(job["path"]):
                try:
                    self._plan_builds(job, FIRST_NICE if self.first_builds else NICE)
                except Exception:  # noqa: BLE001 - building ahead decides nothing; judging says what is wrong
                    self.builds[job["id"]] = {}
                self.first_builds = False
            else:
                self.events.phase(job["id"], "waiting for GPU")
        kernelbench = [job for job in self.jobs if profiler.is_kernelbench(job["path"])]
        if kernelbench:
            # Model alone and torch.compile(Model) of each problem run in pre-started sandboxes
            # where sandboxes are isolated (profiler.sandbox.pool.warm_kind): have them ready.
            from profiler.sandbox import POOL

            POOL.reserve("kernelbench", kernelbench[0]["time_limit"], 2)
        for job in self.jobs:
            if self.stopping.is_set():
                return
            try:
                answer = self._judge(job)
            except profiler.Cancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - one problem's failure is that problem's result
                self.events.send({"id": job["id"], "error": f"{type(exc).__name__}: {exc}"})
                continue
            self.events.send({"id": job["id"], "answer": answer})

    def _problem(self, job: dict) -> Any:
        from profiler.judge import KernelBenchProblem

        if job["id"] not in self.problems:
            self.problems[job["id"]] = KernelBenchProblem(job["baseline"], job["path"], job["time_limit"],
                                                          should_cancel=self.stopping.is_set,
                                                          on_phase=self.pause.on_phase, protocol=_protocol(job))
        return self.problems[job["id"]]

    def _plan_builds(self, job: dict, nice: int) -> None:
        problem = self._problem(job)
        builds = self.builds[job["id"]] = {}
        for candidate in problem.buildable(job["documents"]):
            builds[candidate] = self.pool.submit(self._build, job["id"], problem, candidate, nice)
        if not builds:
            self.events.phase(job["id"], "waiting for GPU")

    def _build(self, job_id: Any, problem: Any, candidate: str, nice: int) -> None:
        if self.stopping.is_set():
            return
        _nice_this_thread(nice)
        self.events.phase(job_id, "building")
        try:
            problem.build(candidate)
        finally:
            # The last of the problem's builds to end says so (the others are done or ending).
            if sum(not f.done() for f in self.builds[job_id].values()) <= 1:
                self.events.phase(job_id, "waiting for GPU")

    def _judge(self, job: dict) -> dict:
        import profiler

        if not profiler.is_kernelbench(job["path"]):
            self.events.phase(job["id"], "timing")
            verdicts = profiler.judge(job["baseline"], job["documents"], job["path"], time_limit=job["time_limit"],
                                      should_cancel=self.stopping.is_set, protocol=_protocol(job))
            return {"verdicts": [v.to_json() for v in verdicts], "profile": None}
        problem = self._problem(job)
        try:
            return self._judge_kernelbench(job, problem)
        finally:
            self.problems.pop(job["id"]).close()

    def _judge_kernelbench(self, job: dict, problem: Any) -> dict:
        from profiler.judge import torch_compile_baseline, with_torch_compile

        documents = job["documents"]
        self.events.phase(job["id"], "timing")
        # Each candidate's sandbox starts while the GPU step before it runs, once its build is
        # done (KernelBenchProblem.prestart: only where that is safe).
        self._prestart(job, problem, documents[0] if documents else None)
        self._on_gpu(problem.reference, documents)
        verdicts = []
        for index, document in enumerate(documents):
            build = self.builds.get(job["id"], {}).get(document)
            if build is not None:
                wait([build])  # its failure decides nothing: judging builds again and says why
            self._prestart(job, problem, documents[index + 1] if index + 1 < len(documents) else None)
            verdicts.append(self._on_gpu(problem.verdict, document))
        profiled = None
        best = best_correct(verdicts)
        if best is not None:
            compiled = self._on_gpu(torch_compile_baseline, job["baseline"], job["path"], job["time_limit"],
                                    self.stopping.is_set, on_phase=self.pause.on_phase)
            verdict = with_torch_compile(copy.deepcopy(verdicts[best]), compiled)
            profiled = {"candidate": best, "verdict": verdict.to_json()}
        return {"verdicts": [v.to_json() for v in verdicts], "profile": profiled}

    def _prestart(self, job: dict, problem: Any, document: str | None) -> None:
        build = self.builds.get(job["id"], {}).get(document)
        if document is not None and (build is None or build.done()):  # a build still running holds the folder
            problem.prestart(document)

    def _on_gpu(self, step, *args, **kwargs):
        """One GPU step (its runs stop the builds once past start-up); the builds go on after
        it, whatever happened, so that nothing waits on a build that is stopped."""
        try:
            return step(*args, **kwargs)
        finally:
            self.pause.release()

    def close(self) -> None:
        """Stop what is left (builds see should_cancel) and let paused builds go, to end."""
        self.stopping.set()
        self.pause.close()
        self.pool.shutdown(wait=True, cancel_futures=True)
        for problem in self.problems.values():
            problem.close()


def _protocol(job: dict) -> Any:
    from profiler.protocol import protocol

    return protocol(job.get("protocol"))


def hard_deadline(jobs: list[dict]) -> float:
    """Seconds after which the worker kills itself whatever it is doing: twice what its
    problems may take on the GPU (builds ahead run beside them)."""
    from dice_lsp.bench.judge import JudgeJob

    return 2 * sum(JudgeJob(**{k: v for k, v in j.items() if k != "id"}).deadline for j in jobs)


def main(argv: list[str]) -> int:
    if argv:
        print("usage: python -m dice_lsp.bench.worker < JOBS.jsonl  (one JudgeJob a line)", file=sys.stderr)
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
