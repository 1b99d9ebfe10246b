"""judge() and profile(): the profiler's public entry points for judging candidates, each in
a fresh sandboxed process (profiler.judging holds the pipelines: .cu, KernelBench, and the
KernelBench schedule `dice bench` uses too); and for judging many problems at once, as
`dice bench` does, the pools that answer alike: JudgePool (worker processes, one per GPU
of this machine) and RayJudgePool (a Ray cluster's GPUs; Ray is imported only when one is
made); and the protocols a judgment runs under (Protocol, protocol(): ours and DICE's), which
`dice bench --protocol` names.

Never imports torch or CuPy: the language server calls these from a thread.
"""

from __future__ import annotations

from typing import Callable

from profiler.judging.common import ProgressFn
from profiler.judging.cuda import cuda_verdicts
from profiler.judging.kernelbench import Checks, keep_a_spare, kernelbench_verdict, measured_again_if_unstable
from profiler.judging.pool import JudgeError, JudgeJob, JudgePool, worker_slots
from profiler.judging.protocol import DEFAULT as DEFAULT_PROTOCOL
from profiler.judging.protocol import DICE_LSP, Protocol, protocol
from profiler.judging.ray_pool import ClusterUnavailable, RayJudgePool
from profiler.judging.schedule import judge_kernelbench
from profiler.sandbox.builds import process_builds, reuse_builds
from profiler.source.document import defines_model_new, is_kernelbench, kernelbench_baseline
from profiler.verdict.types import Verdict

__all__ = ["ClusterUnavailable", "DEFAULT_PROTOCOL", "JudgeError", "JudgeJob", "JudgePool", "Protocol", "RayJudgePool",
           "judge", "profile", "protocol", "worker_slots"]


def judge(baseline: str, candidates: list[str], path: str, *, kernel: str | None = None,
          time_limit: float = 60.0, on_progress: ProgressFn | None = None,
          should_cancel: Callable[[], bool] | None = None, protocol: Protocol = DICE_LSP) -> list[Verdict]:
    """A verdict for each candidate document against the baseline document, each candidate
    in a fresh sandboxed process. on_progress(index, total) is called before each
    (1-based); should_cancel() is polled and raises Cancelled when it turns true. `protocol`
    (profiler.judging.protocol) applies to KernelBench documents; a .cu document is judged by ours. A
    KernelBench baseline is its Model: a ModelNew in the baseline document is left out of it
    (profiler.source.document.kernelbench_baseline)."""
    if is_kernelbench(path):
        return judge_kernelbench(kernelbench_baseline(baseline), list(candidates), path, time_limit, on_progress, should_cancel, protocol)
    return cuda_verdicts(baseline, list(candidates), path, kernel, time_limit, on_progress, should_cancel)


def profile(source: str, path: str, *, kernel: str | None = None, time_limit: float = 60.0,
            should_cancel: Callable[[], bool] | None = None, keep_warm: bool = True) -> Verdict:
    """Compile, check and time what the document holds: a .cu kernel alone (outputs fully
    written and repeatable), or a KernelBench ModelNew against its Model (Model alone when
    there is no ModelNew), with torch.compile(Model) as a second baseline. keep_warm: after a
    KernelBench profile, keep a sandbox started for the document's next run (a process that
    profiles once and exits, as `dice profile` does, passes False)."""
    if is_kernelbench(path):
        candidate = source if defines_model_new(source) else None
        builds = process_builds() if reuse_builds() else None
        checks = Checks(source, path)

        def measure() -> Verdict:
            return kernelbench_verdict(source, candidate, path, time_limit, should_cancel, with_compile=True,
                                       builds=builds, checks=checks)

        verdict = measured_again_if_unstable(measure(), measure)
        if keep_warm:
            keep_a_spare(source, path, time_limit, builds, checks)
        return verdict
    (verdict,) = cuda_verdicts(source, [None], path, kernel, time_limit, None, should_cancel)
    return verdict
