"""The judge's clock over a timing, on the CPU: batches granted over real pipes, inputs from
the judge's seeds, every pair checked with the candidate first, and what the clock makes of a
candidate that works where its events do not look. The GPU side (the same loop timing CUDA
work, the adversarial library) is tests/profiler/judging/test_gpu_adversarial.py's."""

from __future__ import annotations

import os
import sys
import time

import pytest

from profiler.measure.fingerprint import SUMS
from profiler.measure.timing import Audited, DeviceOps, TimedRunWrong, time_pair
from profiler.sandbox.clock import MAX_BATCH_PAIRS, HarnessClock, JudgeClock, pair_seed
from profiler.verdict import rules


class _Event:
    """An event on the host's clock: a 'kernel' here is host work, so events and the wall
    clock measure the same thing, as they do on a GPU for work on the timed stream."""

    def __init__(self):
        self.at = 0.0

    def record(self):
        self.at = time.perf_counter()


def _ops() -> DeviceOps:
    return DeviceOps(new_event=_Event, elapsed_ms=lambda start, end: (end.at - start.at) * 1000,
                     synchronize=lambda: None, flush_l2=lambda: None)


class _Pipes:
    """A JudgeClock and a HarnessClock joined by real pipes, as profiler.sandbox joins them."""

    def __enter__(self):
        asks_r, asks_w = os.pipe()
        grants_r, grants_w = os.pipe()
        self.judge = JudgeClock(asks_r, grants_w)
        self.judge.start()
        self.harness = HarnessClock(asks_w, grants_r)
        self._fds = (asks_w, grants_r)
        return self

    def __exit__(self, *exc):
        for fd in self._fds:
            os.close(fd)
        self.judge.join(5)


def _spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def _timing(candidate, fresh_work_ms: float = 0.0, runs: int = 96, base_ms: float = 1.0):
    """time_pair of a 'baseline' that spins base_ms against `candidate`, audited through real
    pipes; fresh_work_ms: what the candidate does where the loop writes a pair's inputs. Returns
    (the judge's log, the order of calls, the pair seeds the inputs came from)."""
    calls, seeds = [], []
    state = {"input": None}

    def fresh(pair: int, seed: int) -> None:
        seeds.append(seed)
        state["input"] = seed
        _spin(fresh_work_ms)  # the candidate's own work, hidden outside the events

    def baseline():
        calls.append("b")
        _spin(base_ms)
        return state["input"]

    def cand():
        calls.append("c")
        return candidate(state["input"])

    with _Pipes() as pipes:
        audit = Audited(pipes.harness, fresh, lambda out, key: [float(out % 1000 + key % 7)], pair_seed)
        time_pair(baseline, cand, _ops(), runs=runs, keep=lambda side, out: out,
                  check=lambda kept: None if kept[0] == kept[1] else "differs", audit=audit)
    return pipes.judge.entries(), calls, seeds


def test_pairs_come_in_the_judges_batches_with_its_seeds_and_every_one_is_reported():
    log, calls, seeds = _timing(lambda x: (_spin(0.5), x)[1], runs=70)
    assert sum(e["pairs"] for e in log) == 70 and all(e["pairs"] <= MAX_BATCH_PAIRS for e in log)
    granted = [pair_seed(e["seed"], i) for e in log for i in range(e["pairs"])]
    assert seeds[1:] == granted  # seeds[0]: the warm-up's own
    timed = calls[-140:]
    assert timed[:4] == ["c", "b", "c", "b"]  # the candidate first in every pair
    for entry in log:
        report = entry["report"]
        assert report["pairs"] == entry["pairs"] and len(report["fingerprints"]) == entry["pairs"]
        assert all(len(side["event_ms"]) == entry["pairs"] for side in report["sides"])
        assert entry["done"] > entry["go"]
    runs = rules.clock_runs(log)
    assert len(runs.sides[1]["event_ms"]) == 70 and len(runs.pairs) == 70


def test_the_warm_up_runs_a_whole_pair_before_the_first_batch_is_asked_for():
    """Runs, keep, check and fingerprint once before any window opens: their first use (lazy
    module loading, cuBLAS's handle) is in neither process's first batch."""
    calls = []

    class Clock:
        def __init__(self, harness):
            self.harness = harness

        def batch(self, want):
            calls.append("grant")
            return self.harness.batch(want)

        def close(self, report):
            self.harness.close(report)

        def end(self):
            self.harness.end()

    def side(name):
        return lambda: (calls.append(name), 1)[1]

    with _Pipes() as pipes:
        audit = Audited(Clock(pipes.harness), lambda pair, seed: None,
                        lambda out, key: (calls.append("print"), [1.0])[1], pair_seed)
        time_pair(side("b"), side("c"), _ops(), runs=3, keep=lambda i, out: (calls.append(f"keep{i}"), out)[1],
                  check=lambda kept: (calls.append("check"), None)[1], audit=audit)
    warm_up = ["b", "c"] * 3 + ["c", "keep1", "b", "keep0", "check", "print"]
    assert calls[:len(warm_up) + 1] == warm_up + ["grant"]
    assert calls[len(warm_up) + 1:] == ["c", "keep1", "b", "keep0", "check", "print"] * 3


def test_a_candidate_right_only_where_it_is_checked_has_no_checked_set_to_read():
    """The issue's frame reader: it looks up the stack for the pairs the loop will check and
    does the work only on those; every pair is checked, so there is no such set, and the
    first pair it skips is wrong."""

    def reads_the_checked_set(x):
        frame = sys._getframe(1)
        while frame is not None:
            chosen = frame.f_locals.get("chosen")
            if isinstance(chosen, set):
                pair = frame.f_locals.get("pair")
                return x if pair in chosen else -1
            frame = frame.f_back
        return -1  # found nothing to read: assumes it is not checked

    with pytest.raises(TimedRunWrong) as caught:
        _timing(reads_the_checked_set, runs=40)
    assert caught.value.pair == 0


def test_work_moved_outside_the_timed_runs_shows_on_the_judges_clock():
    """A candidate whose 'kernel' runs where the loop writes the pair's inputs: its events
    read nothing, the judge's windows hold its 4 ms a pair. (Medians over batches: a loaded
    2-core machine deschedules the loop at random, by milliseconds.)"""
    work = lambda x: (_spin(4.0), x)[1]  # noqa: E731
    hidden, _, _ = _timing(lambda x: x, fresh_work_ms=4.0, runs=160)
    reference, _, _ = _timing(work, runs=160)
    honest, _, _ = _timing(work, runs=160)
    extra: dict = {}
    caught = rules.clock_excess(rules.clock_runs(hidden), rules.clock_runs(reference), extra)
    assert caught is not None and caught > 2.0  # most of the 4 ms it hid, charged to it
    assert extra["clock_accounting"]["batches"] == 5
    honest_gap = rules.clock_excess(rules.clock_runs(honest), rules.clock_runs(reference), {})
    assert honest_gap is None or honest_gap < caught / 2


# One output's fingerprint as a candidate's process reports it (SUMS keyed sums, then r), and
# Model's tolerance beside it (U, the r limit, then G_1 .. G_m): a sum may lie about 0.76 from Model's.
PRINT = [1.0] * SUMS + [1.0]
ALLOWED = [0.01, 0.01] + [0.0] * SUMS


def _entry(batch: int, pairs: int, window_ms: float, base_ms: float, cand_ms: float, prints=None) -> dict:
    side = lambda ms: {"event_ms": [ms] * pairs, "flush_ms": [0.1] * pairs, "tail_ms": [0.01] * pairs,  # noqa: E731
                       "wall_ms": [ms + 0.12] * pairs}
    return {"batch": batch, "seed": batch, "key": batch, "pairs": pairs, "go": 10.0, "done": 10.0 + window_ms / 1000,
            "report": {"pairs": pairs, "fingerprints": prints or [PRINT] * pairs,
                       "sides": [side(base_ms), side(cand_ms)]}}


def test_claims_that_do_not_fit_the_judges_window_are_rejected():
    with pytest.raises(ValueError, match="claim .* more than"):
        rules.clock_runs([_entry(0, 10, window_ms=5.0, base_ms=0.4, cand_ms=0.2)])
    fits = rules.clock_runs([_entry(0, 10, window_ms=8.0, base_ms=0.4, cand_ms=0.2)])
    assert fits.unexplained_ms == [pytest.approx(0.2)]


def test_a_batch_not_closed_by_its_report_is_rejected():
    entry = _entry(0, 10, 8.0, 0.4, 0.2)
    entry["report"]["sides"][1]["event_ms"] = entry["report"]["sides"][1]["event_ms"][:9]
    with pytest.raises(ValueError, match="9 values for 10 pairs"):
        rules.clock_runs([entry])
    with pytest.raises(ValueError, match="no timed pairs"):
        rules.clock_runs([])


def test_a_baseline_slower_beside_the_candidate_than_alone_is_charged_past_the_slack():
    extra: dict = {}
    assert rules.baseline_excess([1.04] * 20, [1.0] * 20, extra) is None  # within BASELINE_SLACK
    assert rules.baseline_excess([1.18] * 20, [1.0] * 20, extra) == pytest.approx(0.13)
    assert extra["baseline_alone_ms"] == 1.0


def _measurement(pairs: int) -> dict:
    """A KernelBench measurement as a candidate's process would send it (its own timing: the
    verdict reads the judge's clock instead)."""
    return {"outcome": "measured", "kind": "kernelbench", "profiling": False, "kernel": "ModelNew", "gpu": "test",
            "timing": {"baseline": [9.0] * pairs, "candidate": [0.001] * pairs, "seconds": 1.0},
            "inputs_checked": 4, "peak_gbs": 3000.0, "bytes_moved": 1000, "escape": None, "extra": {}}


def _audit(log, reference, fingerprints=None):
    from profiler.verdict.decision import Audit

    count = sum(e["pairs"] for e in log)
    audited = list(range(0, count, 3))
    return Audit(log, reference, audited, fingerprints or [PRINT] * len(audited), [ALLOWED] * len(audited))


def _logs(cand_ms: float, base_ms: float = 1.0, window_ms: float | None = None, alone_ms: float = 1.0):
    per_pair = (window_ms or base_ms + cand_ms + 0.3) * 8
    log = [_entry(j, 8, per_pair, base_ms, cand_ms) for j in range(4)]
    reference = [_entry(j, 8, (2 * alone_ms + 0.3) * 8, alone_ms, alone_ms) for j in range(4)]
    return log, reference


def test_the_verdict_takes_its_times_from_the_judges_clock_not_the_candidates_result():
    from profiler.verdict.decision import from_measurement

    log, reference = _logs(cand_ms=0.5)
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert verdict.status == "faster" and verdict.speedup == pytest.approx(2.0)  # not the 9000x it claimed
    assert verdict.extra["checked_apart_pairs"] == 11


def test_a_timed_run_whose_fingerprint_is_not_models_is_wrong_and_named():
    from profiler.verdict.decision import from_measurement

    log, reference = _logs(cand_ms=0.5)
    audit = _audit(log, reference)
    audit.fingerprints[2] = [5.0] * SUMS + [1.0]  # the third audited pair: timed run 7
    verdict = from_measurement(_measurement(32), 60.0, None, audit)
    assert verdict.status == "wrong" and verdict.message.startswith("wrong on timed run 7 against Model run in a "
                                                                   "process of its own: output 0: its fingerprint")


def test_time_the_clock_saw_outside_the_runs_and_a_slowed_baseline_are_charged_to_the_candidate():
    from profiler.verdict.decision import from_measurement

    log, reference = _logs(cand_ms=0.1, window_ms=1.0 + 0.5 + 0.3)  # 0.4 ms a pair the runs do not explain
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert verdict.status == "suspicious" and "escaped_clock" in verdict.extra["flags"]
    assert verdict.time_ms == pytest.approx(0.5)
    log, reference = _logs(cand_ms=0.5, base_ms=1.2)  # the baseline beside it 20% slower than alone
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert "slowed_baseline" in verdict.extra["flags"] and verdict.status == "suspicious"
    assert verdict.time_ms == pytest.approx(0.5 + 1.2 - 1.05)
    assert verdict.speedup <= 1.0 / verdict.time_ms + 1e-9  # no more than the baseline alone supports


def test_the_speedup_is_no_larger_than_the_baseline_alone_supports():
    from profiler.verdict.decision import from_measurement

    log, reference = _logs(cand_ms=0.5, base_ms=1.04, alone_ms=1.0)  # inside the slack: not charged
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert verdict.status == "faster" and verdict.speedup == pytest.approx(2.0)
    assert verdict.extra["speedup_in_process"] == pytest.approx(2.08)


def test_the_candidates_flushes_are_compared_with_the_same_slot_of_models_own_loop():
    """The candidate runs first in every pair, right after the pair's inputs were written: its
    flush evicts those written lines, the baseline's (after a run that read) does not. Model's
    own loop has the same slot; only a flush slower than that one's is the candidate's work."""
    from profiler.verdict.decision import from_measurement

    def first_flushes(entries, ms):
        for e in entries:
            e["report"]["sides"][1]["flush_ms"] = [ms] * e["pairs"]

    log, reference = _logs(cand_ms=0.5)
    first_flushes(log, 0.14)  # 0.04 ms over the baseline beside it (0.1)
    first_flushes(reference, 0.14)
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert verdict.status == "faster" and not verdict.extra.get("flags")
    first_flushes(log, 0.17)
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert "escaped_timer" in verdict.extra["flags"] and verdict.status == "suspicious"
    assert verdict.extra["escape_check"]["flush_extra_ms"] == pytest.approx(0.03)


def test_a_wrong_timed_run_found_in_the_candidates_process_is_a_wrong_verdict():
    from profiler.verdict.decision import from_measurement

    m = {"outcome": "wrong", "where": "timed run", "timed_run": 10, "problem": "output 0: 12 elements differ",
         "inputs_checked": 4, "kind": "kernelbench", "extra": {}}
    verdict = from_measurement(m, 10.0)
    assert verdict.status == "wrong" and verdict.message == "wrong on timed run 10: output 0: 12 elements differ"
