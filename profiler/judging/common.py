"""What both judging pipelines share: fresh seeds and a time budget for each request, and
progress over the candidates."""

from __future__ import annotations

import secrets
from typing import Callable

from profiler.judging.protocol import DICE_LSP, Protocol
from profiler.sandbox import Cancelled
from profiler.verdict.types import Verdict

# Progress: on_progress(index, total) before candidate `index` (1-based) is judged, and
# on_progress(0, total) when all of them are first built at once (KernelBench).
ProgressFn = Callable[[int, int], None]


def seeds(protocol: Protocol = DICE_LSP) -> list[int]:
    """Fresh seeds for every check (the last one checked after timing), so a candidate cannot
    be tuned to known inputs."""
    return [secrets.randbits(31) for _ in range(protocol.input_sets)]


def time_budget(time_limit: float) -> float:
    """Seconds of timing runs per candidate: a share of its limit, at most 2 s."""
    return max(0.2, min(2.0, 0.2 * time_limit))


def check_cancel(should_cancel) -> None:
    if should_cancel is not None and should_cancel():
        raise Cancelled("cancelled")


def each(candidates: list, on_progress: ProgressFn | None, should_cancel,
         judge_one: Callable[[str | None], Verdict]) -> list[Verdict]:
    """judge_one for each candidate in turn, reporting progress and stopping on cancel."""
    verdicts = []
    for index, candidate in enumerate(candidates, start=1):
        check_cancel(should_cancel)
        if on_progress is not None:
            on_progress(index, len(candidates))
        verdicts.append(judge_one(candidate))
    return verdicts
