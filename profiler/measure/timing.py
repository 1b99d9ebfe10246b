"""Time kernels the way triton.testing.do_bench does, for a baseline and a candidate at once,
with every run on inputs it has not seen and all of the process's GPU work inside it.

A pair of runs, baseline and candidate in alternating order (so that clock and temperature
drift hit both alike), goes like this:

    fresh(i)                 new input values for pair i, written into both sides' own buffers
    for each side:
      synchronize()          the whole device idle: nothing of an earlier run, on any stream,
                             overlaps this one
      pre, flush L2, start   the 256 MB flush evicts the inputs from L2; while the GPU runs it,
                             the host is already launching the side's work behind `start`
      fn()                   the side's work
      end                    where the launching stream's work ends
      synchronize(), idle    the device idle again: every stream and every launch any thread
                             made so far has finished; `idle` is recorded after it

The time of a run is `end - start` (the launching stream's GPU time). Two more numbers per run
catch work that other streams or threads do, and are the same measurement on both sides:
`idle - end` (the tail: the host's wake-up from the synchronize, plus work still running
elsewhere after the launching stream finished) and `start - pre` (the flush: work another
stream runs while the flush does, before `start`, slows the flush). The cost of the waits
is equal on both sides because both sides run the same sequence, and the verdict compares
the candidate's tails and flushes with the baseline's (profiler.verdict.decision), never with a
constant. CPU time that threads other than this one spend while the runs go on is counted
too. The inputs of a pair are fresh, so a result kept from an earlier call is stale: the
outputs of randomly chosen pairs are checked (`check`), which a cache keyed on pointers,
shapes or sampled values fails, or, when it misses, its speedup vanishes.

A KernelBench timing is audited (time_audited): one side only, ModelNew in the candidate's
process and Model in a process that runs no candidate code, each timing the same loop on its
own. Its runs come in batches that the judge grants over its own clock
(profiler.sandbox.clock), each with the seed its runs' inputs come from and the key their
outputs are fingerprinted with, and each batch's report goes to the judge as soon as its last
run has ended. No baseline runs in the candidate's process while it is timed: the judge's
windows then hold the candidate's work and the loop's own, nothing the candidate could move its
work into, and the baseline's times come from a process the candidate never reached. The
candidate's process may read and rewrite all of its side; what the judge relies on is its own
clock, Model's loop timed apart, and the audit of the reported fingerprints
(profiler.verdict.decision). Before every run the persisting part of L2 is given back
(DeviceOps.reset_l2).

The device is reached through DeviceOps so that the same loop times CuPy kernels (.cu) and
PyTorch modules (KernelBench); profiler.run.device builds them.
"""

from __future__ import annotations

import random
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from profiler.measure.stats import Speedup, TimeSummary, speedup_interval, summarize

L2_FLUSH_BYTES = 256 * 1024 * 1024
WARMUP_RUNS = 3
MIN_RUNS = 20
MAX_RUNS = 5000
TARGET_REL_HALF_WIDTH = 0.01  # stop adding runs once the interval is within +-1% of the ratio
EVENT_RESOLUTION_MS = 0.0005
# Share of the timed pairs whose outputs are checked (at least CHECKED_FIRST in the first batch).
CHECKED_SHARE = 0.03
CHECKED_FIRST = 2
# Runs a batch of an audited timing asks the judge for (the judge grants its own number:
# profiler.sandbox.clock.GRANT_PAIRS), and the fewest runs an audited timing makes: six of
# the judge's batches (profiler.verdict.rules.MIN_CLOCK_BATCHES).
BATCH_PAIRS = 16
MIN_AUDITED_RUNS = 96


@dataclass
class DeviceOps:
    """What the timing loop needs from a CUDA library."""

    new_event: Callable[[], Any]  # an object with .record() on the current stream
    elapsed_ms: Callable[[Any, Any], float]
    synchronize: Callable[[], None]  # the whole device, every stream
    flush_l2: Callable[[], None]
    clock_ms: Callable[[], float] = field(default=lambda: time.perf_counter_ns() / 1e6)  # the host's wall clock
    # Before every run, on both sides: no L2 line stays persisting from an access-policy
    # window set earlier (a persisting line survives the flush).
    reset_l2: Callable[[], None] = field(default=lambda: None)


class TimedRunWrong(Exception):
    """A checked timed pair whose candidate output is not the baseline's (`pair`: its index)."""

    def __init__(self, pair: int, problem: str):
        super().__init__(f"timed run {pair + 1}: {problem}")
        self.pair, self.problem = pair, problem


@dataclass
class Audited:
    """What a judged timing (time_audited) does beyond the plain loop: its runs come in
    batches from `clock` (profiler.sandbox.clock: each batch's input seed and fingerprint key,
    granted by the judge), fresh(run, seed) writes a run's inputs from its seed, and
    fingerprint(output, key) is what the batch's report carries of each output."""

    clock: Any
    fresh: Callable[[int, int], None]
    fingerprint: Callable[[Any, int], list]
    pair_seed: Callable[[int, int], int]


@dataclass
class Runs:
    """One side's runs in the order they ran: event times (ms) of the launching stream, and
    per run the flush and the tail (module docstring)."""

    event_ms: list[float] = field(default_factory=list)
    flush_ms: list[float] = field(default_factory=list)
    tail_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)  # the host's clock, from `pre` to the device idle

    def extend(self, other: "Runs") -> None:
        self.event_ms += other.event_ms
        self.flush_ms += other.flush_ms
        self.tail_ms += other.tail_ms
        self.wall_ms += other.wall_ms

    def to_json(self) -> dict:
        return {"flush_ms": self.flush_ms, "tail_ms": self.tail_ms, "wall_ms": self.wall_ms}


@dataclass
class PairTiming:
    baseline: TimeSummary
    candidate: TimeSummary
    speedup: Speedup
    baseline_runs: list[float] = field(repr=False)
    candidate_runs: list[float] = field(repr=False)
    seconds: float = 0.0
    baseline_detail: Runs = field(default_factory=Runs, repr=False)
    candidate_detail: Runs = field(default_factory=Runs, repr=False)
    checked_pairs: int = 0
    other_threads_cpu_s: float = 0.0

    def to_json(self) -> dict:
        return {"baseline": self.baseline.to_json(), "candidate": self.candidate.to_json(),
                "runs": len(self.baseline_runs), "seconds": self.seconds}

    def escape_json(self) -> dict:
        """The numbers profiler.verdict.decision reads for work outside the timed stream."""
        return {"baseline": self.baseline_detail.to_json(), "candidate": self.candidate_detail.to_json(),
                "other_threads_cpu_s": self.other_threads_cpu_s, "checked_pairs": self.checked_pairs}


def _interleaved(count: int, runs: int):
    """(run index, fn index) of `runs` runs of `count` fns, their order alternating every run,
    so that neither side always runs first (or always in a slower moment)."""
    for r in range(runs):
        for i in (range(count) if r % 2 == 0 else reversed(range(count))):
            yield r, i


def _cpu_s() -> tuple[float, float]:
    """(CPU seconds of this whole process, of this thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, time.thread_time()


class _Loop:
    """The runs of one timing: fns[i]() is side i; fresh(pair) writes the pair's inputs;
    keep(i, output) snapshots side i's output of a checked pair and check(kept) compares
    them (None: they agree). With `audit` (Audited) the runs of its one side come in the
    judge's batches and each output is fingerprinted (run_audited); without it, randomly chosen
    pairs are checked (a .cu timing, whose candidate runs no code of its own in this process)."""

    def __init__(self, fns: list[Callable[[], Any]], ops: DeviceOps, fresh: Callable[[int], None] | None,
                 keep: Callable[[int, Any], Any] | None, check: Callable[[list], str | None] | None,
                 audit: Audited | None = None):
        self.fns, self.ops, self.fresh, self.keep, self.check = fns, ops, fresh, keep, check
        self.audit = audit
        self.pairs = 0  # pairs run so far
        self.checked = 0
        self.other_cpu_s = 0.0
        self.stopped = False  # the judge granted no more pairs
        self._random = random.SystemRandom()

    def warm_up(self) -> None:
        if self.audit is not None:
            self.audit.fresh(-1, self._random.getrandbits(62))
        elif self.fresh is not None:
            self.fresh(-1)
        for _ in range(WARMUP_RUNS):
            for fn in self.fns:
                fn()
        if self.audit is not None:
            # One run as a batch has it, before the first batch: a kernel's first use (CUDA
            # loads modules lazily, the fingerprint's first scatter) would otherwise land in the
            # first batch's window, in one process and not in the other.
            output = None
            for i in range(len(self.fns)):
                output = self._timed(i)[0]
            self.audit.fingerprint(output, self._random.getrandbits(62))
            del output
        self.ops.synchronize()

    def _chosen(self, count: int) -> set[int]:
        """The pairs of the next `count` whose outputs are checked: drawn at random, so that
        no call can tell whether it is checked."""
        if self.check is None:
            return set()
        wanted = max(1, round(count * CHECKED_SHARE), CHECKED_FIRST if self.pairs == 0 else 0)
        return set(self._random.sample(range(self.pairs, self.pairs + count), min(count, wanted)))

    def _timed(self, i: int) -> tuple[Any, tuple, float]:
        """One run of side i: (its output, its four events, its wall time in ms)."""
        ops = self.ops
        ops.synchronize()
        ops.reset_l2()
        pre, start, end, idle = (ops.new_event() for _ in range(4))
        began = ops.clock_ms()
        pre.record()
        ops.flush_l2()
        start.record()
        output = self.fns[i]()
        end.record()
        ops.synchronize()
        wall = ops.clock_ms() - began
        idle.record()
        return output, (pre, start, end, idle), wall

    def _resolved(self, events: list[list[tuple]], walls: list[list[float]]) -> list[Runs]:
        ops = self.ops
        out = []
        for side, wall in zip(events, walls):
            runs = Runs(wall_ms=wall)
            for pre, start, end, idle in side:
                # Events resolve about half a microsecond; two that read the same instant still
                # bound a positive time, and ratios of times need it.
                runs.event_ms.append(max(ops.elapsed_ms(start, end), EVENT_RESOLUTION_MS))
                runs.flush_ms.append(ops.elapsed_ms(pre, start))
                runs.tail_ms.append(ops.elapsed_ms(end, idle))
            out.append(runs)
        return out

    def run(self, count: int) -> list[Runs]:
        if self.audit is not None:
            return self.run_audited(count)
        ops = self.ops
        chosen = self._chosen(count)
        events: list[list[tuple]] = [[] for _ in self.fns]
        walls: list[list[float]] = [[] for _ in self.fns]
        kept: list = [None] * len(self.fns)
        # The outputs of the pair under way, held until it ends: a side never gets the other
        # side's freed output (the same values, the same pair's inputs) from the allocator.
        held: list = []
        cpu_before, thread_before = _cpu_s()
        started_pair = None
        for r, i in _interleaved(len(self.fns), count):
            pair = self.pairs + r
            if pair != started_pair:  # the pair's first run
                started_pair = pair
                held.clear()
                if self.fresh is not None:
                    ops.synchronize()
                    self.fresh(pair)
            output, recorded, wall = self._timed(i)
            walls[i].append(wall)
            events[i].append(recorded)
            held.append(output)
            if pair in chosen:
                kept[i] = self.keep(i, output) if self.keep is not None else output
                if all(k is not None for k in kept):
                    problem = self.check(kept)
                    kept = [None] * len(self.fns)
                    self.checked += 1
                    if problem is not None:
                        raise TimedRunWrong(pair, problem)
            del output
        held.clear()
        ops.synchronize()
        cpu_after, thread_after = _cpu_s()
        self.other_cpu_s += max(0.0, (cpu_after - cpu_before) - (thread_after - thread_before))
        self.pairs += count
        return self._resolved(events, walls)

    def run_audited(self, count: int) -> list[Runs]:
        """`count` runs (fewer where the judge stops granting), in the judge's batches. A run:
        its inputs from the batch's seed, the side's run, the fingerprint of its output with the
        batch's key; the batch's report (every run's times, every fingerprint) goes to the judge
        as soon as its last run has ended. Nothing of a batch exists before its grant: no input,
        no key."""
        audit, ops = self.audit, self.ops
        out = [Runs() for _ in self.fns]
        left = count
        while left > 0 and not self.stopped:
            grant = audit.clock.batch(min(left, BATCH_PAIRS))
            if grant is None:
                self.stopped = True
                break
            pairs, key = int(grant["pairs"]), int(grant["key"])
            events: list[list[tuple]] = [[] for _ in self.fns]
            walls: list[list[float]] = [[] for _ in self.fns]
            prints = []
            cpu_before, thread_before = _cpu_s()
            for index in range(pairs):
                pair = self.pairs + index
                ops.synchronize()
                audit.fresh(pair, audit.pair_seed(int(grant["seed"]), index))
                output = None
                for i in range(len(self.fns)):
                    output, recorded, wall = self._timed(i)
                    walls[i].append(wall)
                    events[i].append(recorded)
                self.checked += 1
                prints.append(audit.fingerprint(output, key))
                del output
            ops.synchronize()
            cpu_after, thread_after = _cpu_s()
            self.other_cpu_s += max(0.0, (cpu_after - cpu_before) - (thread_after - thread_before))
            runs = self._resolved(events, walls)
            audit.clock.close({"pairs": pairs, "fingerprints": prints,
                               "sides": [{"event_ms": r.event_ms, **r.to_json()} for r in runs]})
            for whole, part in zip(out, runs):
                whole.extend(part)
            self.pairs += pairs
            left -= pairs
        return out

    def finish(self) -> None:
        if self.audit is not None:
            self.audit.clock.end()


def time_one(fn: Callable[[], Any], ops: DeviceOps, *, budget_s: float = 1.0) -> TimeSummary:
    """One kernel alone (used to compare with triton.testing.do_bench)."""
    return summarize(sample_one(fn, ops, budget_s=budget_s))


def sample_one(fn: Callable[[], Any], ops: DeviceOps, *, budget_s: float = 1.0,
               fresh: Callable[[int], None] | None = None, runs: int | None = None) -> list[float]:
    """The event timings (ms) of one kernel alone, as many runs as budget_s allows (or
    `runs`), each as a side of time_pair runs (fresh inputs, the device idle around it)."""
    loop = _Loop([fn], ops, fresh, None, None)
    loop.warm_up()
    if runs is None:
        (estimate,) = loop.run(5)
        per_run_s = max(summarize(estimate.event_ms).median_ms + summarize(estimate.flush_ms).median_ms,
                        1e-3) / 1000
        runs = int(min(MAX_RUNS, max(MIN_RUNS, budget_s / per_run_s)))
    (samples,) = loop.run(runs)
    return samples.event_ms


@dataclass
class AuditedTiming:
    """One side's audited runs (time_audited)."""

    runs: Runs
    seconds: float
    other_threads_cpu_s: float = 0.0

    def escape_json(self) -> dict:
        return {"candidate": self.runs.to_json(), "other_threads_cpu_s": self.other_threads_cpu_s,
                "checked_pairs": len(self.runs.event_ms)}


def median_half_width(samples: list[float]) -> float:
    """The 95% interval of the median of `samples` (order statistics: no assumption on their
    distribution), as a share of the median: half its width over the median."""
    ordered = sorted(samples)
    n = len(ordered)
    if n < 2:
        return float("inf")
    spread = 0.98 * n ** 0.5  # 1.96 sqrt(n) / 2 ranks either side of the middle
    low, high = ordered[max(0, int(n / 2 - spread))], ordered[min(n - 1, int(n / 2 + spread + 0.5))]
    middle = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return (high - low) / 2 / middle if middle > 0 else float("inf")


def time_audited(fn: Callable[[], Any], ops: DeviceOps, audit: Audited, *, budget_s: float = 2.0,
                 runs: int | None = None) -> AuditedTiming:
    """The audited timing of one side (module docstring): its runs in the judge's batches,
    adding runs until the median's 95% interval is within TARGET_REL_HALF_WIDTH / sqrt(2) (two
    such sides, timed apart, give a speedup within about TARGET_REL_HALF_WIDTH) or budget_s is
    spent; `runs` when given (rounded up to the judge's batches, at least MIN_AUDITED_RUNS;
    fewer only where the judge stops granting)."""
    started = time.perf_counter()
    loop = _Loop([fn], ops, None, None, None, audit)
    loop.warm_up()
    (done,) = loop.run(max(runs or 0, MIN_AUDITED_RUNS))
    while runs is None and not loop.stopped and len(done.event_ms) >= 2:
        spent = time.perf_counter() - started
        if median_half_width(done.event_ms) <= TARGET_REL_HALF_WIDTH / 2 ** 0.5 \
                or len(done.event_ms) >= MAX_RUNS or spent >= budget_s:
            break
        per_run_s = spent / len(done.event_ms)
        more = int(min(len(done.event_ms), MAX_RUNS - len(done.event_ms), (budget_s - spent) / per_run_s))
        if more < 2:
            break
        (extra,) = loop.run(more)
        done.extend(extra)
    loop.finish()
    return AuditedTiming(done, time.perf_counter() - started, loop.other_cpu_s)


def time_pair(baseline: Callable[[], Any], candidate: Callable[[], Any], ops: DeviceOps, *,
              budget_s: float = 2.0, fresh: Callable[[int], None] | None = None,
              keep: Callable[[int, Any], Any] | None = None, check: Callable[[list], str | None] | None = None,
              runs: int | None = None) -> PairTiming:
    """Timing of baseline and candidate in one process where no candidate code runs of its
    own (a .cu candidate, torch.compile(Model) against Model; module docstring), adding runs
    until the speedup's 95% interval is within TARGET_REL_HALF_WIDTH or budget_s is spent;
    exactly `runs` pairs when given. fresh(pair) writes pair `pair`'s inputs (pair -1: the
    warm-up's); keep(side, output) snapshots an output of a checked pair (side 0: baseline) and
    check([base, cand]) says how they differ (None: they agree). TimedRunWrong when a check
    fails."""
    started = time.perf_counter()
    loop = _Loop([baseline, candidate], ops, fresh, keep, check)
    loop.warm_up()
    base, cand = loop.run(runs or MIN_RUNS)
    while runs is None and not loop.stopped and len(base.event_ms) >= 2:
        speedup = speedup_interval(base.event_ms, cand.event_ms)
        half_width = (speedup.high - speedup.low) / 2 / speedup.ratio
        spent = time.perf_counter() - started
        if half_width <= TARGET_REL_HALF_WIDTH or len(base.event_ms) >= MAX_RUNS or spent >= budget_s:
            break
        # Double the runs, but only as many as the rest of the budget allows.
        per_run_s = spent / len(base.event_ms)
        more = int(min(len(base.event_ms), MAX_RUNS - len(base.event_ms), (budget_s - spent) / per_run_s))
        if more < 2:
            break
        extra_base, extra_cand = loop.run(more)
        base.extend(extra_base)
        cand.extend(extra_cand)
    loop.finish()
    return PairTiming(summarize(base.event_ms), summarize(cand.event_ms),
                      speedup_interval(base.event_ms, cand.event_ms), base.event_ms, cand.event_ms,
                      time.perf_counter() - started, base, cand, loop.checked, loop.other_cpu_s)
