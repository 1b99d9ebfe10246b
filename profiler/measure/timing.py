"""Time kernels the way triton.testing.do_bench does, for a baseline and a candidate at once.

Each run: flush L2 by writing a 256 MB buffer, record a CUDA event on the launch stream,
launch, record another. Baseline and candidate runs are interleaved (alternating which goes
first) so that clock and temperature drift hit both alike; the number of runs adapts until
the speedup's interval is narrow or the time budget is spent. Events are read after one
device-wide synchronize.

A second, short measurement catches work that escapes the events (launched on another
stream): per run, wall-clock time from launch to a device synchronize against event time.

The device is reached through DeviceOps so that the same loop times CuPy kernels (.cu) and
PyTorch modules (KernelBench); profiler.run.device builds them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from profiler.measure.stats import Speedup, TimeSummary, speedup_interval, summarize

L2_FLUSH_BYTES = 256 * 1024 * 1024
WARMUP_RUNS = 3
MIN_RUNS = 20
MAX_RUNS = 5000
TARGET_REL_HALF_WIDTH = 0.01  # stop adding runs once the interval is within +-1% of the ratio
ESCAPE_RUNS = 10
EVENT_RESOLUTION_MS = 0.0005


@dataclass
class DeviceOps:
    """What the timing loop needs from a CUDA library."""

    new_event: Callable[[], Any]  # an object with .record() on the current stream
    elapsed_ms: Callable[[Any, Any], float]
    synchronize: Callable[[], None]  # the whole device, every stream
    flush_l2: Callable[[], None]


@dataclass
class PairTiming:
    baseline: TimeSummary
    candidate: TimeSummary
    speedup: Speedup
    baseline_runs: list[float] = field(repr=False)
    candidate_runs: list[float] = field(repr=False)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"baseline": self.baseline.to_json(), "candidate": self.candidate.to_json(),
                "runs": len(self.baseline_runs), "seconds": self.seconds}


def _interleaved(count: int, runs: int):
    """The fn indices of `runs` runs of `count` fns, their order alternating every run, so
    that neither side always runs first (or always in a slower moment)."""
    for r in range(runs):
        yield from (range(count) if r % 2 == 0 else reversed(range(count)))


def _timed_runs(fns: list[Callable[[], Any]], runs: int, ops: DeviceOps) -> list[list[float]]:
    """`runs` event timings of each fn, interleaved; fn order alternates every run."""
    events: list[list[tuple[Any, Any]]] = [[] for _ in fns]
    for i in _interleaved(len(fns), runs):
        ops.flush_l2()
        start, end = ops.new_event(), ops.new_event()
        start.record()
        fns[i]()
        end.record()
        events[i].append((start, end))
    ops.synchronize()
    # Events resolve about half a microsecond; two that read the same instant still bound a
    # positive time, and ratios of times need it.
    return [[max(ops.elapsed_ms(s, e), EVENT_RESOLUTION_MS) for s, e in pairs] for pairs in events]


def time_one(fn: Callable[[], Any], ops: DeviceOps, *, budget_s: float = 1.0) -> TimeSummary:
    """One kernel alone (used to compare with triton.testing.do_bench)."""
    return summarize(sample_one(fn, ops, budget_s=budget_s))


def sample_one(fn: Callable[[], Any], ops: DeviceOps, *, budget_s: float = 1.0) -> list[float]:
    """The event timings (ms) of one kernel alone, as many runs as budget_s allows."""
    for _ in range(WARMUP_RUNS):
        fn()
    (estimate,) = _timed_runs([fn], 5, ops)
    per_run_s = max(summarize(estimate).median_ms, 1e-3) / 1000
    runs = int(min(MAX_RUNS, max(MIN_RUNS, budget_s / per_run_s)))
    (samples,) = _timed_runs([fn], runs, ops)
    return samples


def time_pair(baseline: Callable[[], Any], candidate: Callable[[], Any], ops: DeviceOps, *,
              budget_s: float = 2.0) -> PairTiming:
    """Interleaved timing of baseline and candidate, adding runs until the speedup's 95%
    interval is within TARGET_REL_HALF_WIDTH or budget_s is spent."""
    started = time.perf_counter()
    for _ in range(WARMUP_RUNS):
        baseline()
        candidate()
    ops.synchronize()
    base_runs, cand_runs = _timed_runs([baseline, candidate], MIN_RUNS, ops)
    while True:
        speedup = speedup_interval(base_runs, cand_runs)
        half_width = (speedup.high - speedup.low) / 2 / speedup.ratio
        spent = time.perf_counter() - started
        if half_width <= TARGET_REL_HALF_WIDTH or len(base_runs) >= MAX_RUNS or spent >= budget_s:
            break
        # Double the runs, but only as many as the rest of the budget allows.
        per_run_s = spent / len(base_runs)
        more = int(min(len(base_runs), MAX_RUNS - len(base_runs), (budget_s - spent) / per_run_s))
        if more < 2:
            break
        extra_base, extra_cand = _timed_runs([baseline, candidate], more, ops)
        base_runs += extra_base
        cand_runs += extra_cand
    return PairTiming(summarize(base_runs), summarize(cand_runs), speedup, base_runs, cand_runs,
                      time.perf_counter() - started)


@dataclass(frozen=True)
class EscapeCheck:
    """Event time against wall time (launch to device synchronize) for one function."""

    event_ms: float
    wall_ms: float

    @property
    def gap_ms(self) -> float:
        return self.wall_ms - self.event_ms


def escape_checks(fns: list[Callable[[], Any]], ops: DeviceOps, runs: int = ESCAPE_RUNS) -> list[EscapeCheck]:
    """Each fn's median event and wall time, the fns interleaved (order alternating every run)
    as in _timed_runs: other work on the GPU or the CPU (another process's kernels, a build)
    stretches the wall times of both alike instead of whichever ran while it lasted."""
    events: list[list[float]] = [[] for _ in fns]
    walls: list[list[float]] = [[] for _ in fns]
    for i in _interleaved(len(fns), runs):
        ops.synchronize()
        start, end = ops.new_event(), ops.new_event()
        t0 = time.perf_counter()
        start.record()
        fns[i]()
        end.record()
        ops.synchronize()
        walls[i].append((time.perf_counter() - t0) * 1000)
        events[i].append(ops.elapsed_ms(start, end))
    return [EscapeCheck(summarize(e).median_ms, summarize(w).median_ms) for e, w in zip(events, walls)]


def escaped_timer(baseline: EscapeCheck, candidate: EscapeCheck) -> bool:
    """True when the candidate's wall time exceeds its event time by much more than the
    baseline's does: work the events did not see (another stream, a host thread)."""
    extra = candidate.gap_ms - baseline.gap_ms
    return extra > max(0.05, 0.5 * candidate.event_ms)
