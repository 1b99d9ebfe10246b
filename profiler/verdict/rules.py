"""The rules that decide whether a measured speedup is proof, as pure functions of the
numbers a harness sends (profiler.measure.timing's per-run records) and of the GPU's own
facts. profiler.verdict.decision applies them; tests pin each one without a GPU.

- Escaped work. Every run ends with a device-wide synchronize, and every run records how long
  its L2 flush took (work another stream runs beside it slows it) and how long after the
  launching stream's end the device went idle (work still running elsewhere). Both are the
  same measurement on both sides, so the candidate's are compared with the baseline's
  medians: what the candidate's exceed them by is work its launching stream did not time,
  and it is added to its times, run by run.
- Busy threads. CPU time that threads other than the timing thread spent during the runs.
- Physical bounds. A time that implies reading the inputs (and writing what of the outputs
  cannot stay in L2) faster than the GPU's memory can, or Model's FLOPs faster than its
  fastest arithmetic can, did not happen as timed.
- Reproducibility. The interval quoted is the bootstrap interval of the runs (paired, or each
  side's apart where the two sides were timed in processes of their own) widened
  to the speedups of the first and second halves of the runs and by REPRODUCIBILITY_SPREAD,
  the spread measured between fresh processes judging the same candidate; halves that
  disagree by more than DRIFT, or a side whose times spread by more than DISPERSION of their
  median, make the timing unstable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Escaped work: the candidate's flush and tail medians may exceed the baseline's by this much
# (milliseconds, or this share of its own time, whichever is more) before it counts.
ESCAPE_FLOOR_MS = 0.003
ESCAPE_SHARE = 0.05
# Clocks: the candidate's runs may leave this much more of their wall time unexplained by
# their events than the baseline's (milliseconds, or this share of its time). Wider than the
# escape limits: host-side launch latencies differ between a Model of two kernels and a
# candidate of one by tens of microseconds (a zeros_like candidate, 20 us, H100 2026-12-05).
CLOCK_FLOOR_MS = 0.05
CLOCK_SHARE = 0.25
# Busy threads: CPU seconds of other threads over this share of the timing's seconds.
THREAD_CPU_SHARE = 0.25
THREAD_CPU_FLOOR_S = 0.05
# Reproducibility.
DRIFT = 0.10  # first half's speedup against the second half's
DISPERSION = 0.35  # interquartile range over median, either side
REPRODUCIBILITY_SPREAD = 0.03  # relative widening for the spread between processes
# Physical bounds. Where NVML gives no theoretical memory bandwidth, the measured copy
# bandwidth times this margin (streams of reads alone run a few percent above copies).
MEASURED_ROOF_MARGIN = 1.15
# Dense multiply-adds' FLOPs per SM per clock of the fastest format a GPU of that major
# compute capability has, doubled for 2:4 sparsity: fp16 on Volta and Turing, int8/fp8 on
# Ampere and Hopper, fp4 on Blackwell. A bound, not a roofline.
FLOPS_PER_SM_CLOCK = {7: 2 * 1024, 8: 2 * 4096, 9: 2 * 8192, 10: 2 * 32768, 12: 2 * 32768}


def _median(values) -> float:
    return float(np.median(np.asarray(values, dtype=np.float64)))


def escaped_work(escape: dict | None, cand_ms: list[float], extra: dict) -> list[float] | None:
    """The candidate's run times with the work its launching stream did not time added, or
    None when there is none worth counting. Records what it found in extra["escape_check"].
    The baseline's records are those of the same loop, in the same slot: beside the candidate
    in a paired timing, Model's own loop in the audit process for an audited one (its runs,
    like the candidate's, follow the writes of their inputs, which a flush then evicts)."""
    if not escape:
        return None
    base, cand = escape["baseline"], escape["candidate"]
    flush_b, tail_b = _median(base["flush_ms"]), _median(base["tail_ms"])
    flush_extra = _median(cand["flush_ms"]) - flush_b
    tail_extra = _median(cand["tail_ms"]) - tail_b
    escaped_ms = max(0.0, flush_extra) + max(0.0, tail_extra)
    limit = max(ESCAPE_FLOOR_MS, ESCAPE_SHARE * _median(cand_ms))
    extra["escape_check"] = {"flush_extra_ms": flush_extra, "tail_extra_ms": tail_extra, "limit_ms": limit,
                             "checked_pairs": escape.get("checked_pairs", 0)}
    if escaped_ms <= limit:
        return None
    return [ms + max(0.0, f - flush_b) + max(0.0, t - tail_b)
            for ms, f, t in zip(cand_ms, cand["flush_ms"], cand["tail_ms"])]


def clock_disagreement(escape: dict | None, base_ms: list[float], cand_ms: list[float],
                       extra: dict | None = None) -> str | None:
    """Why the candidate's event times cannot be believed, or None. Each run's wall time (the
    host's clock from `pre` to the device idle) is its flush, its event time and its tail plus
    a launch latency, the same on both sides; a candidate whose runs leave more of the wall
    time unexplained than the baseline's had its events read short (a patched timer)."""
    if not escape or not escape["candidate"].get("wall_ms"):
        return None

    def unexplained(side: dict, events: list[float]) -> float:
        return _median([w - f - e - t for w, f, e, t in zip(side["wall_ms"], side["flush_ms"], events,
                                                               side["tail_ms"])])

    base = escape["baseline"]
    if not base.get("wall_ms"):
        return None
    gap = unexplained(escape["candidate"], cand_ms) - unexplained(base, base_ms)
    limit = max(CLOCK_FLOOR_MS, CLOCK_SHARE * _median(cand_ms))
    if extra is not None:
        extra["clock_check"] = {"unexplained_extra_ms": gap, "limit_ms": limit}
    if gap > limit:
        return (f"the candidate's runs took {gap:.4f} ms a run more by the wall clock than their CUDA events, "
                f"flushes and tails add up to")
    return None


def busy_threads(escape: dict | None, seconds: float, extra: dict) -> bool:
    """Whether threads besides the timing thread spent CPU time during the runs."""
    if not escape:
        return False
    other = float(escape.get("other_threads_cpu_s", 0.0))
    extra["other_threads_cpu_s"] = other
    return other > max(THREAD_CPU_FLOOR_S, THREAD_CPU_SHARE * seconds)


@dataclass(frozen=True)
class Interval:
    ratio: float
    low: float
    high: float
    within_low: float  # the bootstrap interval of the paired runs alone
    within_high: float

    @property
    def faster(self) -> bool:
        return self.low > 1.0


def _halves(base: list[float], cand: list[float]) -> tuple[float, float]:
    """The speedups of the first and of the second half of each side's runs (in the order they
    ran: the two sides may hold different numbers of runs)."""
    b, c = len(base) // 2, len(cand) // 2
    return (_median(base[:b]) / _median(cand[:c]), _median(base[b:]) / _median(cand[c:]))


def reproducible_interval(base: list[float], cand: list[float], paired: bool = True) -> Interval:
    """The speedup's ratio of medians and the interval quoted for it (module docstring);
    paired False: the sides were timed apart (profiler.measure.stats)."""
    from profiler.measure.stats import speedup_interval

    within = speedup_interval(base, cand, paired=paired)
    low, high = within.low, within.high
    if min(len(base), len(cand)) >= 8:
        first, second = _halves(base, cand)
        low, high = min(low, first, second), max(high, first, second)
    return Interval(within.ratio, low / (1 + REPRODUCIBILITY_SPREAD), high * (1 + REPRODUCIBILITY_SPREAD),
                    within.low, within.high)


def instability(base: list[float], cand: list[float]) -> str | None:
    """Why these timings are not a reproducible number, or None."""
    if min(len(base), len(cand)) >= 8:
        first, second = _halves(base, cand)
        if abs(first / second - 1) > DRIFT:
            return f"the speedup drifted from {first:.2f}x in the first half of the runs to {second:.2f}x in the second"
    for name, times in (("baseline", base), ("candidate", cand)):
        q25, median, q75 = np.percentile(np.asarray(times, dtype=np.float64), [25, 50, 75])
        if median > 0 and (q75 - q25) / median > DISPERSION:
            return (f"the {name}'s times spread widely (interquartile range {100 * (q75 - q25) / median:.0f}% of "
                    f"the median {median:.4f} ms)")
    return None


def memory_roof_gbs(measured_peak_gbs: float) -> tuple[float, str]:
    """(the GPU's memory bandwidth no kernel can exceed, where it comes from)."""
    from profiler.machine import gpu

    theoretical = gpu.theoretical_bandwidth_gbs()
    if theoretical:
        return theoretical, "the GPU's theoretical memory bandwidth"
    return measured_peak_gbs * MEASURED_ROOF_MARGIN, (f"{MEASURED_ROOF_MARGIN:.2f}x the measured copy bandwidth")


def peak_flops(facts: dict) -> float | None:
    """FLOP/s no format of this GPU reaches (FLOPS_PER_SM_CLOCK), or None when unknown."""
    from profiler.machine import gpu

    capability, sms = facts.get("capability"), facts.get("sms")
    clock = gpu.max_sm_clock_mhz()
    per_clock = FLOPS_PER_SM_CLOCK.get(int(str(capability).split(".")[0])) if capability else None
    if not (per_clock and sms and clock):
        return None
    return float(per_clock) * int(sms) * float(clock) * 1e6


def physical_bound(facts: dict, measured_peak_gbs: float, time_ms: float) -> str | None:
    """Which physical limit a run of `time_ms` breaks, or None. `facts`: input_bytes,
    output_bytes, l2_bytes (what must cross the memory bus: every input read, and what of
    the outputs cannot stay in L2), flops (Model's), capability and sms."""
    seconds = time_ms * 1e-3
    if "input_bytes" in facts:
        required = int(facts["input_bytes"]) + max(0, int(facts.get("output_bytes", 0)) - int(facts.get("l2_bytes", 0)))
        roof, source = memory_roof_gbs(measured_peak_gbs)
        implied = required / seconds / 1e9
        if roof and implied > roof:
            return (f"{time_ms:.4f} ms implies {implied:.0f} GB/s to read the inputs and write the outputs, "
                    f"{100 * implied / roof:.0f}% of {source} ({roof:.0f} GB/s)")
    flops = facts.get("flops")
    peak = peak_flops(facts) if flops else None
    if peak and flops / seconds > peak:
        return (f"{time_ms:.4f} ms implies {flops / seconds / 1e12:.0f} TFLOP/s for Model's {flops:.3g} FLOPs, "
                f"{100 * flops / seconds / peak:.0f}% of the most any format of this GPU does ({peak / 1e12:.0f})")
    return None


# The judge's clock (profiler.sandbox.clock). A batch's claimed run times may exceed its
# window by this much (the two clocks' rounding).
CLAIM_SLACK_MS = 0.05
# The candidate's pairs may leave this much more of their window unexplained by their timed
# runs than Model's pairs of the same loop in a process of their own (milliseconds, or this
# share of a reference pair's window, whichever is more) before the difference counts as its
# work. Host wake-ups and the allocator differ a little between two processes.
CLOCK_EXCESS_FLOOR_MS = 0.02
CLOCK_EXCESS_SHARE = 0.05
# Below that limit, an excess past this many standard errors of the two medians is charged
# without a flag; and no timing of fewer batches than MIN_CLOCK_BATCHES is believed.
CLOCK_NOISE_SIGMAS = 3.0
MIN_CLOCK_BATCHES = 6


@dataclass(frozen=True)
class ClockRuns:
    """A timing as the judge's clock received it: each side's per-run records, each batch's
    unexplained milliseconds a pair (its window over its pairs, less its runs' mean), and each
    pair's (batch, index in batch, fingerprints)."""

    sides: list[dict]  # the sides timed (an audited timing: one): {"event_ms", "flush_ms", "tail_ms", "wall_ms"}
    unexplained_ms: list[float]
    pairs: list[tuple[int, int, list]]


def _numbers(values, count: int, what: str) -> list[float]:
    if not isinstance(values, list) or len(values) != count:
        raise ValueError(f"{what}: {len(values) if isinstance(values, list) else 'no'} values for {count} pairs")
    out = [float(v) for v in values]
    if not all(np.isfinite(out)):
        raise ValueError(f"{what}: values that are not finite")
    return out


def clock_runs(log: list[dict], sides: int = 1) -> ClockRuns:
    """The timing of a run from the judge's clock log (JudgeClock.entries), checked: every
    batch closed by a report of its granted runs on `sides` sides, whose timed runs fit in its
    window. Raises ValueError saying what does not hold."""
    if not log:
        raise ValueError("the judge's clock granted no timed pairs")
    records = [{k: [] for k in ("event_ms", "flush_ms", "tail_ms", "wall_ms")} for _ in range(sides)]
    unexplained, pairs = [], []
    for entry in log:
        batch, count, report = entry["batch"], int(entry["pairs"]), entry.get("report")
        if not isinstance(report, dict) or report.get("pairs") != count or not isinstance(report.get("sides"), list) \
                or len(report["sides"]) != sides:
            raise ValueError(f"batch {batch + 1} was not closed by a report of its {count} pairs")
        window_ms = (float(entry["done"]) - float(entry["go"])) * 1000
        claimed = 0.0
        for side, got in zip(records, report["sides"]):
            for key in side:
                values = _numbers(got.get(key) if isinstance(got, dict) else None, count, f"batch {batch + 1} {key}")
                if key == "event_ms" and min(values) <= 0:
                    raise ValueError(f"batch {batch + 1}: run times that are not positive")
                side[key] += values
            claimed += sum(side["event_ms"][-count:])
        if claimed > window_ms + CLAIM_SLACK_MS:
            raise ValueError(f"the timed runs of batch {batch + 1} claim {claimed:.3f} ms, more than the "
                             f"{window_ms:.3f} ms the judge's clock saw between granting and closing it")
        unexplained.append((window_ms - claimed) / count)
        fingerprints = report.get("fingerprints")
        if not isinstance(fingerprints, list) or len(fingerprints) != count:
            raise ValueError(f"batch {batch + 1} reported no fingerprint of every pair")
        pairs += [(batch, index, fingerprints[index]) for index in range(count)]
    return ClockRuns(records, unexplained, pairs)


def _median_error(values) -> float:
    """The standard error of the median of `values` (a normal's 1.2533 sigma / sqrt(n), sigma
    from the median absolute deviation, so that one descheduled batch does not set it)."""
    data = np.asarray(values, dtype=np.float64)
    mad = float(np.median(np.abs(data - np.median(data))))
    return 1.2533 * 1.4826 * mad / math.sqrt(max(1, data.size))


def clock_excess(candidate: ClockRuns, reference: ClockRuns, extra: dict) -> tuple[float, bool]:
    """(milliseconds a run charged to the candidate, whether that is past the limit): what the
    candidate's runs spent outside their timed calls beyond what Model's runs of the same loop
    spend where no candidate code runs. Past CLOCK_EXCESS_FLOOR_MS / CLOCK_EXCESS_SHARE of a
    run's window it is charged and flagged; below that, past CLOCK_NOISE_SIGMAS standard errors
    of the difference of the two medians (over the judge's batches, all of one size; the
    errors as Model's batches spread) it is charged, so that time taken from the timed calls'
    reports shows however small. Records what it found in
    extra["clock_accounting"]. Raises ValueError when either side has fewer than
    MIN_CLOCK_BATCHES batches: too few to tell."""
    for what, runs in (("the candidate's", candidate), ("Model's", reference)):
        if len(runs.unexplained_ms) < MIN_CLOCK_BATCHES:
            raise ValueError(f"{what} timing went by {len(runs.unexplained_ms)} of the judge's batches, fewer than "
                             f"the {MIN_CLOCK_BATCHES} that tell its time outside its timed calls")
    cand, ref = _median(candidate.unexplained_ms), _median(reference.unexplained_ms)
    # The noise of a difference of two medians, both taken as Model's process has it: the
    # candidate's own spread is its to make (hidden work in some batches and not others).
    noise = CLOCK_NOISE_SIGMAS * math.sqrt(2) * _median_error(reference.unexplained_ms)
    window = ref + sum(_median(side["event_ms"]) for side in reference.sides)
    limit = max(CLOCK_EXCESS_FLOOR_MS, CLOCK_EXCESS_SHARE * window)
    excess = cand - ref
    charged = excess if excess > min(noise, limit) else 0.0
    extra["clock_accounting"] = {"unexplained_ms": cand, "reference_unexplained_ms": ref, "noise_ms": noise,
                                 "limit_ms": limit, "charged_ms": charged, "batches": len(candidate.unexplained_ms)}
    return charged, excess > limit
