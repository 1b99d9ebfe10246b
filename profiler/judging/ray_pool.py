"""Judging a bench run's problems on a Ray cluster: `dice bench ... --judge ray` (a local
cluster, started for the run) or `--judge ray://HEAD:10001` (a running cluster, through Ray
Client) or `--judge HEAD:6379` (from a machine of the cluster).

Each problem is two Ray tasks:
- `build_task` (CPU: BUILD_CPUS per candidate, at most a machine's): its candidates'
  load_inline builds side by side, by the schedule's build_ahead (profiler.judging.schedule:
  sandboxed, GPU hidden, for the machine's GPU, so nothing is built on a machine without one). What it builds stays in that machine's build
  store (on disk where sandboxes are isolated: profiler.sandbox.builds; elsewhere the task
  builds nothing and the judge worker builds, as locally). Building decides nothing, and
  while a verdict measures on that machine its builds stop (SIGSTOP), as the local worker
  stops its own (profiler.judging.schedule.builders_beside).
- `judge_on_gpu` (one GPU, sent when one is free, preferably on the machine that built):
  the problem judged by the local judge worker (JudgePool with the one GPU Ray gave the
  task), with the same sandbox, the same trust rules and the same wall-clock limit as
  `dice bench` on one machine; the verdicts are the worker's.
A cluster without GPUs judges as a machine without one: the verdict tasks take CPUs, and
the verdicts say no_gpu.

Ray retries nothing here: a verdict task whose worker or machine died is submitted again by
this side (up to MAX_ATTEMPTS), which says so on stderr and records every machine that was
lost in the verdicts' `extra["judged_on"]`. A problem that could not be judged at all is a
JudgeError, that problem's result, as locally. The machines of the cluster need this package
installed (`pip install dice-lsp[cluster]`, same Python and Ray as the head).
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

from profiler.judging.pool import JudgeError, JudgeJob, PhaseFn

# CPUs a build task holds per candidate: building a load_inline extension compiles two
# files at once (the local worker's share too: profiler.judging.problem.half_the_cpus).
BUILD_CPUS = 2
# Times a problem is sent to a machine before it counts as one that cannot be judged.
MAX_ATTEMPTS = 3
# Margin on the problem's own deadline before this side gives a task up (the worker inside
# it stops a hung problem itself; this is for a machine that stopped answering).
TASK_MARGIN_S = 300.0
LOCAL = "ray"


class ClusterUnavailable(Exception):
    """No Ray to judge on: not installed, or the cluster cannot be reached."""


def ray_address(spec: str) -> str:
    """What ray.init takes for --judge: for `ray`, "local", a new cluster of this machine
    (never one that happens to run here already)."""
    return "local" if spec == LOCAL else spec


def builders_dir() -> Path:
    """This machine's folder of running build tasks (an empty file per process id), which
    the judge worker reads to stop their builds while it measures (profiler.judging.schedule.builders_beside).
    Yours alone: a process id planted there would be stopped."""
    folder = Path(tempfile.gettempdir()) / f"dice-ray-builders-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    facts = folder.stat()
    if facts.st_uid != os.getuid() or facts.st_mode & 0o077:
        raise PermissionError(f"{folder} is not yours alone")
    return folder


def build_task(job: dict) -> dict[str, Any]:
    """The problem's candidates built on this machine by the schedule's build_ahead (nothing
    without a GPU to build for), registered so that a judge worker measuring on this machine
    stops them meanwhile."""
    import ray
    from profiler.judging.problem import KernelBenchProblem
    from profiler.judging.schedule import build_ahead
    from profiler.judging.worker import _protocol
    from profiler.sandbox.builds import persistent_root, reuse_builds
    from profiler.source.document import is_kernelbench

    built = 0
    # Builds outlive this task only in a store on disk (where sandboxes are isolated and
    # builds are reused); else the judge worker builds them itself, as it does locally.
    if is_kernelbench(job["path"]) and reuse_builds() and persistent_root() is not None:
        problem = KernelBenchProblem(job["baseline"], job["path"], job["time_limit"], protocol=_protocol(job))
        mark = builders_dir() / str(os.getpid())
        mark.touch()
        try:
            built = build_ahead(problem, job["documents"])
        finally:
            mark.unlink(missing_ok=True)
            problem.close()
    return {"node": ray.get_runtime_context().get_node_id(), "built": built}


def judge_on_gpu(job: dict) -> dict[str, Any]:
    """The problem judged by the local judge worker on this task's GPU: {"answer"} or
    {"error"} (the problem's own failure, not the machine's), with where it ran."""
    import ray
    from profiler.judging.pool import run_worker
    from profiler.judging.schedule import BUILDERS_ENV

    os.environ[BUILDERS_ENV] = str(builders_dir())  # inherited by the judge worker
    gpus = [str(g) for g in ray.get_gpu_ids()]
    # Ray puts the task's GPU in CUDA_VISIBLE_DEVICES; the worker is pinned to it.
    slot = os.environ.get("CUDA_VISIBLE_DEVICES") if gpus else None
    where = {"host": socket.gethostname(), "node": ray.get_runtime_context().get_node_id(),
             "gpu": slot, "pid": os.getpid(), "started": time.time()}
    try:
        return {"answer": run_worker(JudgeJob(**job), slot), **where, "seconds": time.time() - where["started"]}
    except JudgeError as exc:
        return {"error": str(exc), **where}


class Problem:
    """One job's way through the cluster."""

    def __init__(self, index: int, job: JudgeJob) -> None:
        self.index, self.job = index, job
        self.attempts = 0
        self.lost: list[str] = []       # why each earlier attempt's machine was lost
        self.node: str | None = None    # where its builds are
        self.give_up_at = 0.0

    @property
    def name(self) -> str:
        return os.path.basename(self.job.path)


class RayJudgePool:
    """JudgePool's interface (judge_all, a context manager) on a Ray cluster."""

    def __init__(self, spec: str, say: Callable[[str], None] | None = None) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ClusterUnavailable("--judge ray needs Ray: pip install -e '.[cluster]'") from exc
        self.spec = spec
        self.say = say or (lambda text: print(f"dice bench: {text}", file=sys.stderr, flush=True))
        self.started = False
        if not ray.is_initialized():
            # A cluster of this machine alone talks over loopback and runs no dashboard.
            local = {"include_dashboard": False, "_node_ip_address": "127.0.0.1"} if spec == LOCAL else {}
            try:
                ray.init(address=ray_address(spec), log_to_driver=False, configure_logging=False, **local)
            except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ...: all say the same
                raise ClusterUnavailable(f"cannot reach the Ray cluster {spec!r}: {exc}") from exc
            self.started = True

    def __enter__(self) -> "RayJudgePool":
        return self

    def __exit__(self, *exc: object) -> None:
        import ray

        if self.started:
            ray.shutdown()

    def gpus(self) -> int:
        import ray

        return int(ray.cluster_resources().get("GPU", 0))

    def judge_all(self, jobs: list[JudgeJob], on_phase: PhaseFn | None = None) -> Iterator[tuple[int, Any]]:
        """(index of the job, its answer or a JudgeError), in the order they finish."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        gpus = self.gpus()
        if not gpus:
            self.say(f"the Ray cluster {self.spec!r} has no GPU: candidates are compiled, not timed")
        build = ray.remote(num_gpus=0, max_retries=0)(build_task)
        # A problem's builds run side by side on one machine: as many CPUs as they need, at
        # most a machine's (a larger request could never be placed).
        machine_cpus = max([int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n["Alive"]] + [1])
        # A verdict holds its GPU and no CPU of Ray's count: build tasks may hold a whole
        # machine's, and a GPU must not wait for them (its worker stops them while it measures).
        # Without GPUs it compiles, on the CPUs a build takes, as a local worker without a GPU.
        verdict_cpus = 0 if gpus else min(BUILD_CPUS, machine_cpus)
        verdict = ray.remote(num_cpus=verdict_cpus, num_gpus=1 if gpus else 0, max_retries=0)(judge_on_gpu)
        phase = on_phase or (lambda index, name: None)
        running: dict[Any, tuple[str, Problem]] = {}    # ObjectRef -> (kind, problem)
        # Verdict tasks are sent only as GPUs come free, so that each starts when it is sent
        # (its time limit counts from then) and a free GPU takes a problem built on its machine.
        waiting: list[Problem] = []                      # ready to judge, in problem order

        def slots() -> int:
            """Verdicts the cluster can run at once now (machines may have left or joined)."""
            resources = ray.cluster_resources()
            return int(resources.get("GPU", 0)) if gpus else max(1, int(resources.get("CPU", 1)) // verdict_cpus)

        def ready_to_judge(problem: Problem) -> None:
            waiting.append(problem)
            waiting.sort(key=lambda p: p.index)
            phase(problem.index, "waiting for GPU")

        def dispatch(freed_node: str | None = None) -> None:
            while waiting and sum(kind == "verdict" for kind, _ in running.values()) < slots():
                problem = next((p for p in waiting if freed_node is not None and p.node == freed_node), waiting[0])
                freed_node = None
                waiting.remove(problem)
                problem.attempts += 1
                options: dict[str, Any] = {}
                if problem.node is not None:  # where its builds are, unless that machine is busy
                    options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                        problem.node, soft=True, _spill_on_unavailable=True)
                problem.give_up_at = time.monotonic() + problem.job.deadline + TASK_MARGIN_S
                running[verdict.options(**options).remote(asdict(problem.job))] = ("verdict", problem)
                phase(problem.index, "timing")

        for index, job in enumerate(jobs):
            problem = Problem(index, job)
            if gpus:
                cpus = max(1, min(BUILD_CPUS * len(job.documents), machine_cpus))
                running[build.options(num_cpus=cpus).remote(asdict(job))] = ("build", problem)
                phase(index, "building")
            else:
                ready_to_judge(problem)
        dispatch()
        try:
            while running or waiting:
                if not running:  # nothing left that could ever take them
                    for problem in waiting:
                        yield problem.index, JudgeError("no GPU left in the Ray cluster to judge it on")
                    return
                limits = [p.give_up_at for kind, p in running.values() if kind == "verdict"]
                timeout = max(0.0, min(limits) - time.monotonic()) if limits else None
                done, _ = ray.wait(list(running), num_returns=1, timeout=timeout)
                if not done:
                    for ref, (kind, problem) in list(running.items()):
                        if kind == "verdict" and problem.give_up_at <= time.monotonic():
                            ray.cancel(ref, force=True)
                            del running[ref]
                            yield problem.index, JudgeError(
                                f"no answer from the Ray cluster within {problem.job.deadline + TASK_MARGIN_S:.0f} s")
                    dispatch()
                    continue
                ref = done[0]
                kind, problem = running.pop(ref)
                freed_node = None
                try:
                    result = ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    result = None
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.ObjectLostError, ray.exceptions.OwnerDiedError) as exc:
                    if kind == "build":
                        ready_to_judge(problem)  # its builds are lost with it; judging builds again
                    else:
                        yield from self._lost(problem, exc, ready_to_judge)
                    result = None
                except ray.exceptions.RayTaskError as exc:  # the task's own code failed
                    if kind == "build":
                        ready_to_judge(problem)  # building decides nothing
                    else:
                        yield problem.index, JudgeError(f"judging failed on the Ray cluster: {exc}")
                    result = None
                if result is not None and kind == "build":
                    problem.node = result["node"] if result["built"] else None
                    ready_to_judge(problem)
                elif result is not None:
                    freed_node = result["node"]
                    yield problem.index, self._answer(problem, result)
                dispatch(freed_node)
        finally:
            for ref in running:
                ray.cancel(ref, force=True)

    def _lost(self, problem: Problem, exc: Exception, again: Callable[[Problem], None]) -> Iterator[tuple[int, Any]]:
        """A verdict task whose worker or machine died: judged again elsewhere, or given up."""
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
        problem.lost.append(why)
        problem.node = None  # the machine it was placed on may be the one that died
        if problem.attempts >= MAX_ATTEMPTS:
            yield problem.index, JudgeError(f"the Ray workers judging it died {problem.attempts} times: "
                                            + " | ".join(problem.lost))
            return
        self.say(f"{problem.name}: the Ray worker judging it died ({why}); judging it again "
                 f"(attempt {problem.attempts + 1} of {MAX_ATTEMPTS})")
        again(problem)

    @staticmethod
    def _answer(problem: Problem, result: dict[str, Any]) -> Any:
        if "error" in result:
            return JudgeError(f"judging failed in the worker on {result['host']}: {result['error']}")
        answer = result["answer"]
        if len(answer["verdicts"]) != len(problem.job.documents):
            return JudgeError(f"judge returned {len(answer['verdicts'])} verdicts for "
                              f"{len(problem.job.documents)} candidates")
        judged_on = {"judge": "ray", "host": result["host"], "node": result["node"], "gpu": result["gpu"],
                     "attempts": problem.attempts, "lost": list(problem.lost),
                     "started": round(result["started"], 3), "seconds": round(result["seconds"], 3)}
        for verdict in answer["verdicts"]:
            verdict.setdefault("extra", {})["judged_on"] = judged_on
        if answer.get("profile"):
            answer["profile"]["verdict"].setdefault("extra", {})["judged_on"] = judged_on
        return answer
