"""The KernelBench judging schedule: one for the editor's judge() and for `dice bench`.

- CPU: the candidates worth building ahead (KernelBenchProblem.buildable) are built by a pool
  of build threads, in problem order, each in a sandbox with the GPU hidden; what a build does
  decides nothing, its judging run finds it or builds again.
- GPU, one problem after the other: Model alone once (the reference every candidate's run
  must agree with), then each candidate once its build is done, then (compile_best) for the
  best correct candidate torch.compile(Model) once, the second baseline. Where sandboxes are
  isolated, each candidate's sandbox starts while the GPU step before it runs
  (KernelBenchProblem.prestart).
- Builds and GPU steps overlap only where the builds can be stopped while a run measures
  (`overlap`, as `dice bench` runs): builds then run niced (FIRST_NICE for the first problem,
  NICE after it) and BuildPause stops them (SIGSTOP, SIGCONT after) while a GPU run is past
  its start-up. Without it a problem's GPU steps wait for all of its builds, and building
  ahead happens only where two or more builds can run side by side.
"""

from __future__ import annotations

import copy
import os
import signal
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable

from profiler.judging import problem as problems
from profiler.judging.common import ProgressFn, check_cancel
from profiler.judging.kernelbench import torch_compile_baseline, with_torch_compile
from profiler.judging.protocol import DICE_LSP, Protocol
from profiler.sandbox import POOL, Cancelled
from profiler.sandbox.keeper import descendants
from profiler.verdict.types import Verdict

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
# Names a folder of build processes beside this judge, whose builds stop too (builders_beside).
BUILDERS_ENV = "DICE_BUILDERS_DIR"
# How often stopped builds are looked for again (a build thread may start one meanwhile).
RESCAN_S = 0.5

PhaseFn = Callable[[Any, str], None]  # on_problem_phase(key, "building" | "waiting for GPU" | "timing")


def best_correct(verdicts: list[Verdict]) -> int | None:
    """Index of the proven correct, timed candidate with the largest speedup (a verdict whose
    measurement proves nothing is not profiled: it does not count in the tables)."""
    timed = [(v.speedup, i) for i, v in enumerate(verdicts) if v.proven and v.correct and v.speedup is not None]
    return max(timed)[1] if timed else None


def builders_beside() -> list[int]:
    """Processes of this machine, outside this judge, whose builds stop too while a run
    measures: Ray's build tasks (profiler.judging.ray_pool), each an empty file named by its
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


def nice_this_thread(nice: int) -> None:
    """This build thread runs at `nice` (or lower in priority already: a thread's niceness
    only goes up without privileges), and so does every process it starts (Linux: a
    thread's own priority, inherited by its children). The first problem's builds are
    submitted first, so each runs on a thread that has built nothing yet."""
    me = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, me, max(nice, os.getpriority(os.PRIO_PROCESS, me)))


def build_niced(problem: Any, candidate: str, nice: int | None) -> None:
    """One candidate built on this thread, at `nice` (None: as it is)."""
    if nice is not None:
        nice_this_thread(nice)
    problem.build(candidate)


def build_ahead(problem: Any, candidates: list[str | None]) -> int:
    """A problem's builds done apart from its judging (a Ray build task: profiler.judging.ray_pool):
    the candidates worth building ahead (KernelBenchProblem.buildable) built side by side, each
    on a thread of its own at NICE (a thread's niceness never comes down, and the process may
    judge next), so that a judge measuring on this machine stops them meanwhile. The number
    whose build ended; a failed build decides nothing (judging builds again and says why)."""
    todo = problem.buildable(candidates)
    if not todo:
        return 0

    def build(candidate: str) -> bool:
        try:
            build_niced(problem, candidate, NICE)
        except Exception:  # noqa: BLE001 - building ahead decides nothing
            return False
        return True

    with ThreadPoolExecutor(len(todo), thread_name_prefix="dice-build-ahead") as builders:
        return sum(builders.map(build, todo))


@dataclass
class _Planned:
    problem: Any                     # problem.KernelBenchProblem
    candidates: list[str | None]
    builds: dict[str, Future] = field(default_factory=dict)


@dataclass(frozen=True)
class Judged:
    """A problem's verdicts, one per candidate, and (compile_best) the best correct one's
    verdict against torch.compile(Model) too, as (its index, that verdict)."""

    verdicts: list[Verdict]
    profile: tuple[int, Verdict] | None = None


class KernelBenchSchedule:
    """Problems added in order (add: their builds start), then judged in that order (judge)."""

    def __init__(self, *, overlap: bool = False, compile_best: bool = False, build_workers: int | None = None,
                 should_cancel: Callable[[], bool] | None = None, on_problem_phase: PhaseFn | None = None) -> None:
        self.overlap, self.compile_best = overlap, compile_best
        self.should_cancel, self.on_problem_phase = should_cancel, on_problem_phase
        self.pause = BuildPause() if overlap else None
        self._workers = build_workers  # build threads; None: as many as the first problem's builds need
        self._pool: ThreadPoolExecutor | None = None
        self._planned: dict[Any, _Planned] = {}
        self._reserved = False

    def add(self, key: Any, baseline: str, path: str, time_limit: float, candidates: list[str | None],
            protocol: Protocol = DICE_LSP) -> None:
        """A problem to judge later; the builds of its candidates start now (where they are
        worth it: see the module's notes)."""
        first = not self._planned
        problem = problems.KernelBenchProblem(baseline, path, time_limit, self.should_cancel,
                                              on_phase=None if self.pause is None else self.pause.on_phase,
                                              protocol=protocol)
        planned = self._planned[key] = _Planned(problem, list(candidates))
        try:
            todo = problem.buildable(planned.candidates)
        except Exception:  # noqa: BLE001 - building ahead decides nothing; judging says what is wrong
            todo = []
        if self._pool is None:
            self._workers = self._workers or problems.build_jobs(len(todo))
            self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="dice-build-ahead")
        if todo and (self.overlap or self._workers >= 2):  # one at a time is what judging does anyway
            nice = (FIRST_NICE if first else NICE) if self.overlap else None
            for candidate in todo:
                planned.builds[candidate] = self._pool.submit(self._build, key, planned, candidate, nice)
        if not planned.builds:
            self._phase(key, "waiting for GPU")

    def _build(self, key: Any, planned: _Planned, candidate: str, nice: int | None) -> None:
        if self.should_cancel is not None and self.should_cancel():
            return
        self._phase(key, "building")
        try:
            build_niced(planned.problem, candidate, nice)
        finally:
            # The last of the problem's builds to end says so (the others are done or ending).
            if sum(not f.done() for f in planned.builds.values()) <= 1:
                self._phase(key, "waiting for GPU")

    def judge(self, key: Any, on_progress: ProgressFn | None = None) -> Judged:
        """The added problem's verdicts, its GPU steps in order (on_progress(i, total) before
        candidate i; on_progress(0, total) first where it waits for its builds)."""
        planned = self._planned[key]
        problem, candidates = planned.problem, planned.candidates
        try:
            if not self.overlap and planned.builds:  # nothing would stop them while a run measures
                if on_progress is not None:
                    on_progress(0, len(candidates))
                self._built(*planned.builds.values())
            if self.compile_best and not self._reserved:
                # Model alone and torch.compile(Model) of each problem run in pre-started
                # sandboxes where sandboxes are isolated (profiler.sandbox.pool.warm_kind).
                POOL.reserve("kernelbench", problem.time_limit, 2)
                self._reserved = True
            self._phase(key, "timing")
            self._prestart(planned, candidates[0] if candidates else None)
            self._on_gpu(problem.reference, candidates)
            verdicts = []
            for index, candidate in enumerate(candidates):
                check_cancel(self.should_cancel)
                if on_progress is not None:
                    on_progress(index + 1, len(candidates))
                self._built(*[planned.builds[candidate]] if candidate in planned.builds else [])
                self._prestart(planned, candidates[index + 1] if index + 1 < len(candidates) else None)
                verdicts.append(self._on_gpu(problem.verdict, candidate))
            best = best_correct(verdicts) if self.compile_best else None
            if best is None:
                return Judged(verdicts)
            compiled = self._on_gpu(torch_compile_baseline, problem.baseline, problem.path, problem.time_limit,
                                    self.should_cancel,
                                    on_phase=None if self.pause is None else self.pause.on_phase)
            return Judged(verdicts, (best, with_torch_compile(copy.deepcopy(verdicts[best]), compiled)))
        finally:
            planned = self._planned.pop(key)
            for build in planned.builds.values():
                build.cancel()  # those not started yet
            wait(list(planned.builds.values()))  # a running one writes into the problem's folders
            planned.problem.close()

    @staticmethod
    def _built(*builds: Future) -> None:
        """Wait for these builds; their failures decide nothing (judging builds again and
        says why), a cancel stops the judging too."""
        wait(builds)
        for build in builds:
            if isinstance(build.exception(), Cancelled):
                raise build.exception()

    def _prestart(self, planned: _Planned, candidate: str | None) -> None:
        build = planned.builds.get(candidate)
        if candidate is not None and (build is None or build.done()):  # a build still running holds the folder
            planned.problem.prestart(candidate)

    def _on_gpu(self, step, *args, **kwargs):
        """One GPU step (its runs stop the builds once past start-up); the builds go on after
        it, whatever happened, so that nothing waits on a build that is stopped."""
        try:
            return step(*args, **kwargs)
        finally:
            if self.pause is not None:
                self.pause.release()

    def _phase(self, key: Any, phase: str) -> None:
        if self.on_problem_phase is not None:
            self.on_problem_phase(key, phase)

    def close(self) -> None:
        """Stop what is left (builds see should_cancel) and let paused builds go, to end."""
        if self.pause is not None:
            self.pause.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for planned in self._planned.values():
            planned.problem.close()
        self._planned.clear()


def judge_kernelbench(baseline: str, candidates: list[str | None], path: str, time_limit: float,
                      on_progress: ProgressFn | None, should_cancel, protocol: Protocol = DICE_LSP) -> list[Verdict]:
    """The editor's judging of one problem: builds of several candidates at once first
    (judged one after the other, 8 candidates would wait minutes for builds the CPUs can do
    side by side), then each judged."""
    schedule = KernelBenchSchedule(should_cancel=should_cancel)
    try:
        schedule.add(0, baseline, path, time_limit, candidates, protocol)
        return schedule.judge(0, on_progress).verdicts
    finally:
        schedule.close()
