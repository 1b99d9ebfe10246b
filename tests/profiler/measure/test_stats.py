"""Speedup statistics: the interval covers the truth and decides "faster" honestly."""

from __future__ import annotations

import numpy as np
import pytest

from profiler.measure.stats import speedup_interval, summarize
from profiler.measure.timing import DeviceOps, TimedRunWrong, time_pair
from profiler.verdict import rules


def test_summary_quantiles():
    s = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.median_ms, s.q25_ms, s.q75_ms, s.iqr_ms, s.n) == (3.0, 2.0, 4.0, 2.0, 5)


def test_clear_speedup_interval_is_above_one_and_contains_the_ratio():
    rng = np.random.default_rng(1)
    base = 2.0 * (1 + 0.02 * rng.standard_normal(200))
    cand = 1.0 * (1 + 0.02 * rng.standard_normal(200))
    s = speedup_interval(base, cand)
    assert s.faster
    assert s.low < s.ratio < s.high
    assert 1.95 < s.low and s.high < 2.05


def test_equal_times_are_not_faster():
    rng = np.random.default_rng(2)
    base = 1.0 + 0.05 * rng.standard_normal(100)
    cand = 1.0 + 0.05 * rng.standard_normal(100)
    s = speedup_interval(np.abs(base), np.abs(cand))
    assert not s.faster
    assert s.low < 1.0 < s.high


def test_paired_drift_cancels_out():
    # A clock that slows down over the run hits both sides alike: the pairs keep the
    # interval narrow although each side alone is spread widely.
    drift = np.linspace(1.0, 3.0, 100)
    s = speedup_interval(1.2 * drift, drift)
    assert s.ratio == pytest.approx(1.2)
    assert s.high - s.low < 0.2


def test_sides_timed_apart_are_resampled_apart_and_may_hold_different_numbers_of_runs():
    rng = np.random.default_rng(3)
    base = 2.0 * (1 + 0.02 * rng.standard_normal(150))
    cand = 1.0 * (1 + 0.02 * rng.standard_normal(260))
    s = speedup_interval(base, cand, paired=False)
    assert s.faster and s.low < s.ratio < s.high and 1.95 < s.low and s.high < 2.05
    same = speedup_interval(np.abs(1 + 0.05 * rng.standard_normal(90)), np.abs(1 + 0.05 * rng.standard_normal(70)),
                            paired=False)
    assert not same.faster and same.low < 1.0 < same.high
    # A drift that paired runs would cancel widens the interval of sides timed apart.
    drift = np.linspace(1.0, 3.0, 100)
    assert speedup_interval(1.2 * drift, drift, paired=False).high - speedup_interval(1.2 * drift, drift).high > 0.1
    interval = rules.reproducible_interval(list(base), list(cand), paired=False)
    assert interval.low <= s.low and interval.high >= s.high
    with pytest.raises(ValueError):
        speedup_interval([1.0], [1.0, 2.0], paired=False)


def test_bad_samples_are_refused():
    with pytest.raises(ValueError):
        speedup_interval([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        speedup_interval([1.0, 2.0], [0.0, 1.0])


class _Event:
    def record(self):
        pass


def _ops(elapsed_ms: float = 1.0) -> DeviceOps:
    """The timing loop's device, without a device: every interval reads elapsed_ms. For the
    loop's own bookkeeping (which pair gets fresh inputs, which outputs are checked); what the
    GPU measures is tests/profiler/test_gpu_*'s."""
    return DeviceOps(new_event=_Event, elapsed_ms=lambda start, end: elapsed_ms, synchronize=lambda: None,
                     flush_l2=lambda: None)


def test_every_pair_gets_fresh_inputs_before_either_side_runs():
    order: list = []
    pair = time_pair(lambda: order.append("b"), lambda: order.append("c"), _ops(), runs=10,
                     fresh=lambda i: order.append(i))
    timed = order[order.index(0):]
    assert timed[:6] == [0, "b", "c", 1, "c", "b"]  # fresh, then both sides, order alternating
    assert [x for x in timed if isinstance(x, int)] == list(range(10))
    assert len(pair.baseline_runs) == len(pair.candidate_runs) == 10


def test_checked_pairs_are_drawn_and_a_wrong_one_stops_the_timing():
    seen: list = []
    pair = time_pair(lambda: "base", lambda: "cand", _ops(), runs=200, keep=lambda side, out: (side, out),
                     check=lambda kept: seen.append(kept))
    assert pair.checked_pairs == len(seen) >= 2 and all(k == [(0, "base"), (1, "cand")] for k in seen)
    with pytest.raises(TimedRunWrong) as caught:
        time_pair(lambda: 1, lambda: 2, _ops(), runs=50, check=lambda kept: "differs" if kept[0] != kept[1] else None)
    assert "differs" in str(caught.value)


def _escape(base_flush, base_tail, cand_flush, cand_tail, n=40) -> dict:
    return {"baseline": {"flush_ms": [base_flush] * n, "tail_ms": [base_tail] * n},
            "candidate": {"flush_ms": [cand_flush] * n, "tail_ms": [cand_tail] * n}, "other_threads_cpu_s": 0.0}


def test_work_after_the_launching_stream_or_beside_the_flush_is_charged_to_the_candidate():
    extra: dict = {}
    honest = _escape(0.085, 0.004, 0.0851, 0.0042)
    assert rules.escaped_work(honest, [0.01] * 40, extra) is None
    after = rules.escaped_work(_escape(0.085, 0.004, 0.085, 1.004), [0.01] * 40, extra)
    assert after == pytest.approx([1.01] * 40)  # a millisecond on another stream after `end`
    beside = rules.escaped_work(_escape(0.085, 0.004, 0.285, 0.004), [0.01] * 40, extra)
    assert beside == pytest.approx([0.21] * 40)  # the flush slowed by work running beside it
    assert extra["escape_check"]["flush_extra_ms"] == pytest.approx(0.2)


def test_busy_threads_are_named():
    extra: dict = {}
    assert not rules.busy_threads({**_escape(1, 1, 1, 1), "other_threads_cpu_s": 0.01}, 2.0, extra)
    assert rules.busy_threads({**_escape(1, 1, 1, 1), "other_threads_cpu_s": 1.5}, 2.0, extra)


def test_the_quoted_interval_covers_both_halves_of_the_run():
    base = [2.0] * 50 + [2.2] * 50
    cand = [1.0] * 100
    interval = rules.reproducible_interval(base, cand)
    assert interval.low <= 2.0 / (1 + rules.REPRODUCIBILITY_SPREAD) + 1e-9
    assert interval.high >= 2.2 * (1 + rules.REPRODUCIBILITY_SPREAD) - 1e-9
    assert interval.within_high - interval.within_low < interval.high - interval.low


def test_drift_and_dispersion_make_a_timing_unstable():
    rng = np.random.default_rng(3)
    steady = list(1.0 + 0.01 * rng.standard_normal(100))
    assert rules.instability([2 * t for t in steady], steady) is None
    assert "drifted" in rules.instability([2.0] * 50 + [3.0] * 50, [1.0] * 100)
    spread = [0.3, 1.0, 1.0, 3.0] * 25  # the same in both halves, widely spread in each
    assert "spread" in rules.instability([2 * t for t in spread], steady)


def test_a_time_faster_than_the_memory_bus_is_impossible(monkeypatch):
    monkeypatch.setattr(rules, "memory_roof_gbs", lambda peak: (3352.0, "the GPU's theoretical memory bandwidth"))
    facts = {"input_bytes": 64 << 20, "output_bytes": 64 << 20, "l2_bytes": 50 << 20}
    assert rules.physical_bound(facts, 3000.0, 0.05) is None  # 67 MB + 14 MB past L2 in 50 us: 1.6 TB/s
    broken = rules.physical_bound(facts, 3000.0, 0.01)
    assert broken is not None and "GB/s" in broken and "theoretical" in broken


def test_more_flops_than_the_gpu_has_is_impossible(monkeypatch):
    monkeypatch.setattr(rules, "memory_roof_gbs", lambda peak: (3352.0, "roof"))
    import profiler.machine.gpu

    monkeypatch.setattr(profiler.machine.gpu, "max_sm_clock_mhz", lambda: 1980)
    facts = {"flops": 2 * 4096 ** 3, "capability": "9.0", "sms": 132}
    assert rules.physical_bound(facts, 3000.0, 1.0) is None  # 137 TFLOP/s
    assert "TFLOP/s" in rules.physical_bound(facts, 3000.0, 0.01)


def test_event_times_the_wall_clock_does_not_back_are_refused():
    def side(event, wall):
        return {"flush_ms": [0.08] * 40, "tail_ms": [0.005] * 40, "wall_ms": [wall] * 40}

    base, cand = [1.0] * 40, [0.5] * 40
    honest = {"baseline": side(1.0, 1.09), "candidate": side(0.5, 0.59)}
    assert rules.clock_disagreement(honest, base, cand) is None
    # events that read 0.55 of what ran: the wall clock saw the whole run
    patched = {"baseline": side(1.0, 1.09), "candidate": side(0.5, 0.5 / 0.55 + 0.09)}  # 0.41 ms unexplained
    assert "wall clock" in rules.clock_disagreement(patched, base, cand)
