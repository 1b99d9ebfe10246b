"""The judge's clock over a timing, on the CPU: runs granted in batches over real pipes, inputs
from the judge's seeds, each output fingerprinted, one side timed in each process, and what
the judge makes of a candidate that works where its events do not look, reads the loop's
frames or moves its work elsewhere. Outputs are real torch tensors (CPU) and their
fingerprints the real ones (profiler.measure.fingerprint). The GPU side (the same loop timing
CUDA work, the adversarial library) is tests/profiler/judging/test_gpu_adversarial.py's."""

from __future__ import annotations

import random
import sys
import time

import pytest
import torch

from profiler.measure import fingerprint as prints
from profiler.measure.fingerprint import SUMS
from profiler.measure.timing import Audited, DeviceOps, time_audited
from profiler.sandbox.clock import GRANT_PAIRS, pair_seed
from profiler.verdict import rules
from profiler.verdict.decision import Audit, from_measurement
from tests.profiler.clock_cases import ClockPipes


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


def _spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


ELEMENTS = 4096


def _inputs(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(int(seed) % (1 << 63))
    return torch.randn(ELEMENTS, generator=generator)


def _model(x: torch.Tensor, ms: float = 1.0) -> torch.Tensor:
    """The problem's Model: relu, taking `ms` of host time (a 'kernel')."""
    _spin(ms)
    return torch.relu(x)


def _timed(side, fresh_work_ms: float = 0.0, runs: int = 96):
    """time_audited of `side(x)` through real pipes, its inputs written from the judge's seeds;
    fresh_work_ms: what that process does where the loop writes a run's inputs. Returns (the
    judge's log, the calls, the seeds the inputs came from)."""
    calls, seeds = [], []
    state = {"input": None}

    def fresh(run: int, seed: int) -> None:
        seeds.append(seed)
        state["input"] = _inputs(seed)
        _spin(fresh_work_ms)

    def fn():
        calls.append("run")
        return side(state["input"])

    with ClockPipes() as pipes:
        time_audited(fn, _ops(), Audited(pipes.harness, fresh, lambda out, key: prints.fingerprint([out], key),
                                         pair_seed), runs=runs)
    return pipes.judge.entries(), calls, seeds


def _judged(candidate, fresh_work_ms: float = 0.0, runs: int = 96, base_ms: float = 1.0):
    """A candidate judged as profiler.judging.kernelbench judges one: its timing in one
    process (here: one pipe pair), Model's in another, Model's fingerprints of audited runs
    picked after the timing, and the verdict from the judge's logs."""
    log, calls, _ = _timed(candidate, fresh_work_ms, runs)
    reference, model_calls, _ = _timed(lambda x: _model(x, base_ms), runs=runs)
    pairs = [(entry, index) for entry in log for index in range(int(entry["pairs"]))]
    audited = sorted(random.Random(7).sample(range(len(pairs)), len(pairs) // 2))  # as the judge picks: at random
    expected = [[_model(_inputs(pair_seed(pairs[i][0]["seed"], pairs[i][1])), 0.0)] for i in audited]
    keys = [int(pairs[i][0]["key"]) for i in audited]
    audit = Audit(log, reference, audited, [prints.fingerprint(e, k) for e, k in zip(expected, keys)],
                  [prints.tolerance(e, key=k) for e, k in zip(expected, keys)])
    # What the candidate's process says of its timing is its own: the verdict reads the clock.
    claimed = {"outcome": "measured", "kind": "kernelbench", "profiling": False, "kernel": "ModelNew",
               "gpu": "test", "timing": {"candidate": [0.001] * runs, "seconds": 1.0}, "inputs_checked": 4,
               "peak_gbs": 3000.0, "bytes_moved": 1000, "escape": None, "extra": {}}
    return from_measurement(claimed, 600.0, None, audit), calls, model_calls


def test_runs_come_in_the_judges_batches_with_its_seeds_and_every_one_is_reported():
    log, calls, seeds = _timed(lambda x: (_spin(0.2), torch.relu(x))[1], runs=100)
    # The judge's batches, of its own size whatever the harness asked: 100 runs asked, 7 x 16 run.
    assert sum(e["pairs"] for e in log) == 112 and all(e["pairs"] == GRANT_PAIRS for e in log)
    granted = [pair_seed(e["seed"], i) for e in log for i in range(e["pairs"])]
    assert seeds[1:] == granted  # seeds[0]: the warm-up's own
    for entry in log:
        report = entry["report"]
        assert report["pairs"] == entry["pairs"] and len(report["fingerprints"]) == entry["pairs"]
        assert len(report["sides"]) == 1 and len(report["sides"][0]["event_ms"]) == entry["pairs"]
        assert all(len(f) == SUMS + 1 for f in report["fingerprints"])
        assert entry["done"] > entry["go"]
    runs = rules.clock_runs(log)
    assert len(runs.sides[0]["event_ms"]) == 112 and len(runs.pairs) == 112


def test_the_judge_grants_batches_of_its_own_size_whatever_is_asked():
    with ClockPipes() as pipes:
        sizes = [pipes.harness.batch(want)["pairs"] for want in (1, 64, 5000, 16)]
        pipes.harness.end()
    assert sizes == [GRANT_PAIRS] * 4


def test_the_warm_up_runs_the_side_as_a_batch_has_it_before_the_first_batch_is_asked_for():
    """The run and its fingerprint once before any window opens: their first use (lazy module
    loading, cuBLAS's handle) is in neither process's first batch."""
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

    with ClockPipes() as pipes:
        audit = Audited(Clock(pipes.harness), lambda run, seed: None,
                        lambda out, key: (calls.append("print"), [1.0])[1], pair_seed)
        time_audited(lambda: (calls.append("run"), 1)[1], _ops(), audit, runs=3)  # at least 96: six batches
    warm_up = ["run"] * 3 + ["run", "print"]
    assert calls[:len(warm_up) + 1] == warm_up + ["grant"]
    assert calls[len(warm_up):] == (["grant"] + ["run", "print"] * GRANT_PAIRS) * 6


def test_an_honest_candidate_is_timed_against_model_timed_in_a_process_of_its_own():
    # A 4x cheaper 'kernel': a loaded 2-core machine's descheduling, charged to it where the
    # clock sees it, does not take that margin.
    verdict, calls, model_calls = _judged(lambda x: _model(x, 0.25))
    assert verdict.baseline_ms == pytest.approx(1.0, rel=0.5) and verdict.speedup > 1.5, verdict.message
    assert verdict.extra["baseline"].startswith("Model timed in a process of its own")
    assert verdict.extra["checked_apart_pairs"] == 48
    assert set(calls) == {"run"} and set(model_calls) == {"run"}  # one side in each process


def test_a_candidate_right_only_where_it_is_checked_has_no_checked_set_to_read():
    """The frame reader: it looks up the stack for the runs the loop will check and does the
    work only on those. No process of the candidate knows which runs the judge will audit: there
    is no such set, and the runs it skipped carry fingerprints that are not Model's."""

    def reads_the_checked_set(x):
        frame = sys._getframe(1)
        while frame is not None:
            for name in ("chosen", "audited", "checked"):
                found = frame.f_locals.get(name)
                if isinstance(found, (set, list)) and found:
                    return torch.relu(x) if frame.f_locals.get("pair") in found else torch.zeros_like(x)
            frame = frame.f_back
        return torch.zeros_like(x)  # found nothing to read: assumes it is not checked

    verdict, _, _ = _judged(reads_the_checked_set)
    assert verdict.status == "wrong" and not verdict.proven
    assert verdict.message.startswith("wrong on timed run ") and "against Model run in a process of its own" in \
        verdict.message


def test_a_candidate_right_on_most_runs_is_caught_on_one_it_skipped():
    count = {"runs": 0}

    def skips_every_fourth(x):
        count["runs"] += 1
        return torch.zeros_like(x) if count["runs"] % 4 == 0 else _model(x, 0.3)

    verdict, _, _ = _judged(skips_every_fourth)
    assert verdict.status == "wrong" and "against Model run in a process of its own" in verdict.message


def test_a_candidate_that_slows_model_in_its_own_process_gains_nothing():
    """A ModelNew that is Model and slows Model wherever it finds it: in its own process no
    baseline is timed, so there is nothing there to slow; the verdict's baseline is Model in
    a process of its own."""
    verdict, calls, _ = _judged(lambda x: _model(x, 1.0))
    assert not (verdict.status == "faster" and verdict.proven), verdict.message
    assert verdict.speedup == pytest.approx(1.0, rel=0.3)
    assert calls == ["run"] * len(calls)  # the candidate's process called nothing but the candidate


def test_work_moved_outside_the_timed_runs_shows_on_the_judges_clock():
    """A candidate whose 'kernel' runs where the loop writes the run's inputs: its events read
    nothing, the judge's windows hold its 4 ms a run. (Medians over batches: a loaded 2-core
    machine deschedules the loop at random, by milliseconds.)"""
    work = lambda x: (_spin(4.0), torch.relu(x))[1]  # noqa: E731
    hidden, _, _ = _timed(torch.relu, fresh_work_ms=4.0, runs=160)
    reference, _, _ = _timed(work, runs=160)
    honest, _, _ = _timed(work, runs=160)
    extra: dict = {}
    caught, flagged = rules.clock_excess(rules.clock_runs(hidden), rules.clock_runs(reference), extra)
    assert flagged and caught > 2.0  # most of the 4 ms it hid, charged to it
    assert extra["clock_accounting"]["batches"] == 10
    honest_gap, _ = rules.clock_excess(rules.clock_runs(honest), rules.clock_runs(reference), {})
    assert honest_gap < caught / 2
    verdict, _, _ = _judged(torch.relu, fresh_work_ms=4.0, runs=96, base_ms=4.0)
    assert not verdict.proven or verdict.status != "faster"
    assert "escaped_clock" in verdict.extra.get("flags", [])


# One output's fingerprint as a candidate's process reports it (SUMS keyed sums, then r), and
# Model's tolerance beside it (U, the r limit, then G_1 .. G_m).
PRINT = [1.0] * SUMS + [1.0]
ALLOWED = [0.01, 0.01] + [0.0] * SUMS


def _entry(batch: int, runs: int, window_ms: float, ms: float, prints_=None, reported_ms: float | None = None) -> dict:
    """A batch as the judge's clock logs it: `runs` runs reporting `reported_ms` (default `ms`) each."""
    ms = ms if reported_ms is None else reported_ms
    side = {"event_ms": [ms] * runs, "flush_ms": [0.1] * runs, "tail_ms": [0.01] * runs, "wall_ms": [ms + 0.12] * runs}
    return {"batch": batch, "seed": batch, "key": batch, "pairs": runs, "go": 10.0, "done": 10.0 + window_ms / 1000,
            "report": {"pairs": runs, "fingerprints": prints_ or [PRINT] * runs, "sides": [side]}}


def test_claims_that_do_not_fit_the_judges_window_are_rejected():
    with pytest.raises(ValueError, match="claim .* more than"):
        rules.clock_runs([_entry(0, 10, window_ms=3.0, ms=0.4)])
    fits = rules.clock_runs([_entry(0, 10, window_ms=6.0, ms=0.4)])
    assert fits.unexplained_ms == [pytest.approx(0.2)]


def test_a_batch_not_closed_by_its_report_is_rejected():
    entry = _entry(0, 10, 8.0, 0.4)
    entry["report"]["sides"][0]["event_ms"] = entry["report"]["sides"][0]["event_ms"][:9]
    with pytest.raises(ValueError, match="9 values for 10 pairs"):
        rules.clock_runs([entry])
    two = _entry(0, 10, 8.0, 0.4)
    two["report"]["sides"] *= 2  # a baseline beside it: not what the judge granted
    with pytest.raises(ValueError, match="not closed by a report"):
        rules.clock_runs([two])
    with pytest.raises(ValueError, match="no timed pairs"):
        rules.clock_runs([])


def _measurement(runs: int) -> dict:
    """A KernelBench measurement as a candidate's process would send it (its own timing, a
    baseline it says it timed too: the verdict reads the judge's clocks instead)."""
    return {"outcome": "measured", "kind": "kernelbench", "profiling": False, "kernel": "ModelNew", "gpu": "test",
            "timing": {"baseline": [9.0] * runs, "candidate": [0.001] * runs, "seconds": 1.0},
            "inputs_checked": 4, "peak_gbs": 3000.0, "bytes_moved": 1000, "escape": None, "extra": {}}


def _audit(log, reference, fingerprints=None):
    count = sum(e["pairs"] for e in log)
    audited = list(range(0, count, 3))
    return Audit(log, reference, audited, fingerprints or [PRINT] * len(audited), [ALLOWED] * len(audited))


def _logs(cand_ms: float, base_ms: float = 1.0, window_ms: float | None = None, batches: int = 6,
          reported_ms: float | None = None, overhead_ms: float = 0.3):
    """The candidate's and Model's logs: `batches` of GRANT_PAIRS runs each, a run's window its
    time and the loop's overhead_ms (or window_ms), with a little jitter between batches."""
    n = GRANT_PAIRS
    log = [_entry(j, n, ((window_ms or cand_ms + overhead_ms) + 0.001 * (j % 3)) * n, cand_ms,
                  reported_ms=reported_ms) for j in range(batches)]
    reference = [_entry(j, n, (base_ms + overhead_ms + 0.001 * ((j + 1) % 3)) * n, base_ms) for j in range(batches)]
    return log, reference


def test_the_verdict_takes_its_times_from_the_judges_clocks_not_the_candidates_result():
    log, reference = _logs(cand_ms=0.5)
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert verdict.status == "faster" and verdict.speedup == pytest.approx(2.0)  # not the 9000x it claimed
    assert verdict.baseline_ms == pytest.approx(1.0)  # Model's own process, not the 9 ms it said
    assert verdict.extra["checked_apart_pairs"] == 32


def test_a_timed_run_whose_fingerprint_is_not_models_is_wrong_and_named():
    log, reference = _logs(cand_ms=0.5)
    audit = _audit(log, reference)
    audit.fingerprints[2] = [5.0] * SUMS + [1.0]  # the third audited run: timed run 7 (every third is audited)
    verdict = from_measurement(_measurement(32), 60.0, None, audit)
    assert verdict.status == "wrong" and verdict.message.startswith("wrong on timed run 7 against Model run in a "
                                                                   "process of its own: output 0: its fingerprint")


def test_time_the_clock_saw_outside_the_runs_is_charged_to_the_candidate():
    log, reference = _logs(cand_ms=0.1, window_ms=0.1 + 0.3 + 0.4)  # 0.4 ms a run the runs do not explain
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert verdict.status == "suspicious" and "escaped_clock" in verdict.extra["flags"]
    assert verdict.time_ms == pytest.approx(0.5, abs=0.003)


def test_a_small_lie_about_the_timed_calls_is_charged_back_without_a_flag():
    """A ModelNew that does Model's 1 ms and reports 0.85 ms on every run, in a loop whose
    own work is 3 ms a run: the 0.15 ms it took from its reports is below the flag's limit
    (5% of a 4 ms window) and charged back all the same: not faster."""
    log, reference = _logs(cand_ms=1.0, reported_ms=0.85, overhead_ms=3.0)
    verdict = from_measurement(_measurement(96), 60.0, None, _audit(log, reference))
    assert verdict.status == "not_faster" and not verdict.extra.get("flags"), verdict.message
    assert verdict.time_ms == pytest.approx(1.0, abs=0.005)
    assert verdict.extra["clock_accounting"]["charged_ms"] == pytest.approx(0.15, abs=0.005)


def test_a_timing_of_too_few_batches_proves_nothing():
    from profiler.sandbox import SandboxOutcome
    from profiler.verdict.decision import from_outcome

    log, reference = _logs(cand_ms=0.5, batches=5)
    verdict = from_outcome(SandboxOutcome("ok", _measurement(80), 0, "", 60.0), audit=_audit(log, reference))
    assert verdict.status == "crash" and not verdict.proven and "fewer than the 6" in verdict.message


def test_the_candidates_flushes_are_compared_with_models_own_loop():
    """A flush slower than Model's in the same loop is work another stream ran beside it."""
    def flushes(entries, ms):
        for e in entries:
            e["report"]["sides"][0]["flush_ms"] = [ms] * e["pairs"]

    log, reference = _logs(cand_ms=0.5)
    flushes(log, 0.14)
    flushes(reference, 0.14)
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert verdict.status == "faster" and not verdict.extra.get("flags")
    flushes(log, 0.17)
    verdict = from_measurement(_measurement(32), 60.0, None, _audit(log, reference))
    assert "escaped_timer" in verdict.extra["flags"] and verdict.status == "suspicious"
    assert verdict.extra["escape_check"]["flush_extra_ms"] == pytest.approx(0.03)


def test_a_wrong_timed_run_found_in_the_candidates_process_is_a_wrong_verdict():
    m = {"outcome": "wrong", "where": "timed run", "timed_run": 10, "problem": "output 0: 12 elements differ",
         "inputs_checked": 4, "kind": "kernelbench", "extra": {}}
    verdict = from_measurement(m, 10.0)
    assert verdict.status == "wrong" and verdict.message == "wrong on timed run 10: output 0: 12 elements differ"
