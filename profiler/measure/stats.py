"""Summaries of timing samples and the confidence interval of a speedup.

Pure numpy, so that the statistics are tested on any machine. The interval is a percentile
bootstrap of the ratio of medians: over *paired* runs where run i of the baseline and run i of
the candidate were timed back to back (interleaved; resampling pairs keeps drifts of clocks
and temperature, which affect both, out of the ratio), and over each side's runs apart where
the two sides were timed in processes of their own (an audited KernelBench timing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CI_METHOD = "percentile bootstrap over paired interleaved runs, ratio of medians"
CI_METHOD_APART = "percentile bootstrap over each side's runs apart (timed in processes of their own), ratio of medians"


@dataclass(frozen=True)
class TimeSummary:
    median_ms: float
    q25_ms: float
    q75_ms: float
    n: int

    @property
    def iqr_ms(self) -> float:
        return self.q75_ms - self.q25_ms

    def to_json(self) -> dict:
        return {"median_ms": self.median_ms, "q25_ms": self.q25_ms, "q75_ms": self.q75_ms,
                "iqr_ms": self.iqr_ms, "n": self.n}


def summarize(times_ms) -> TimeSummary:
    samples = np.asarray(times_ms, dtype=np.float64)
    if samples.size == 0:
        raise ValueError("no timing samples")
    q25, median, q75 = np.percentile(samples, [25, 50, 75])
    return TimeSummary(float(median), float(q25), float(q75), int(samples.size))


@dataclass(frozen=True)
class Speedup:
    ratio: float  # median(baseline) / median(candidate)
    low: float
    high: float
    level: float = 0.95

    @property
    def faster(self) -> bool:
        """Faster only when the whole interval is above 1."""
        return self.low > 1.0


def speedup_interval(baseline_ms, candidate_ms, *, level: float = 0.95, resamples: int = 2000,
                     seed: int = 0, paired: bool = True) -> Speedup:
    """Ratio of medians and its `level` interval, resampling the (baseline, candidate) pairs,
    or (paired False) each side's runs apart."""
    base = np.asarray(baseline_ms, dtype=np.float64)
    cand = np.asarray(candidate_ms, dtype=np.float64)
    if paired and base.shape != cand.shape or min(base.size, cand.size) < 2:
        raise ValueError("need the same number (>= 2) of paired baseline and candidate runs" if paired
                         else "need at least 2 runs of each side")
    if (cand <= 0).any() or (base <= 0).any():
        raise ValueError("timing samples must be positive")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, base.size, size=(resamples, base.size))
    apart = picks if paired else rng.integers(0, cand.size, size=(resamples, cand.size))
    ratios = np.median(base[picks], axis=1) / np.median(cand[apart], axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return Speedup(float(np.median(base) / np.median(cand)), float(low), float(high), level)
