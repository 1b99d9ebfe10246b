"""KernelBench metrics (fast_p, best of N, geometric mean, what is not counted) over Verdict objects.

The verdicts are the profiler's own Verdict dataclass serialised as bench stores them; the
speedups are chosen so each rule of the definition decides a different problem.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from profiler.verdict.types import Verdict

from dice_lsp.bench.progress import verdict_words
from dice_lsp.bench.report import format_table
from dice_lsp.bench.results import CandidateRecord, TaskRecord
from dice_lsp.bench.stats import (ALL_LEVELS, EAGER, NO_GPU_NOTE, TORCH_COMPILE, compile_speedup, counted, fast_p,
                                  geometric_mean, left_out, outcome, table)


def correct(speedup: float) -> Verdict:
    status = "faster" if speedup > 1 else "not_faster"
    return Verdict(status, True, True, speedup, (speedup * 0.95, speedup * 1.05), 1.0 / speedup, 1.0, [],
                   f"{speedup:.2f}x", inputs_checked=4, gpu="NVIDIA H200")


def wrong() -> Verdict:
    return Verdict.failed("wrong", "wrong on input set 2", compiled=True, gpu="NVIDIA H200")


def build_error() -> Verdict:
    return Verdict.failed("compile_error", "does not build")


def task(name: str, level: str, *verdicts: Verdict, profile_speedup_vs_compile: float | None = None) -> TaskRecord:
    record = TaskRecord(name, level, f"{name}.py", "done",
                        [CandidateRecord(f"code {i}", {}, v.to_json()) for i, v in enumerate(verdicts)])
    if profile_speedup_vs_compile is not None:
        profiled = correct(3.0)
        profiled.extra.update(compile_ms=1.0, speedup_vs_compile=profile_speedup_vs_compile)
        record.profile = {"candidate": 0, "verdict": profiled.to_json()}
    return record


@pytest.fixture
def tasks() -> list[TaskRecord]:
    return [
        task("a", "level1", wrong(), correct(1.5)),            # best of N: the correct one counts
        task("b", "level1", correct(0.8), correct(2.5)),       # best speedup among correct ones: 2.5
        task("c", "level1", wrong(), build_error()),           # built once, never correct
        task("d", "level2", build_error(), build_error()),     # nothing built
        TaskRecord("e", "level2", "e.py", "error", error="generation failed: boom"),
        task("f", "level2", correct(1.0)),                     # correct, speedup not > 1
    ]


def test_rows_per_level_follow_the_definitions(tasks: list[TaskRecord]) -> None:
    result = table(tasks, "NVIDIA H200", EAGER)
    rows = {r.level: r for r in result.rows}
    assert [r.level for r in result.rows] == ["level1", "level2", ALL_LEVELS]
    l1, l2, everything = rows["level1"], rows["level2"], rows[ALL_LEVELS]
    assert (l1.problems, l1.compiled, l1.correct) == (3, 3, 2)
    assert l1.fast_1 == pytest.approx(2 / 3) and l1.fast_2 == pytest.approx(1 / 3)
    assert l1.geomean_speedup == pytest.approx(math.sqrt(1.5 * 2.5))
    assert (l2.problems, l2.compiled, l2.correct, l2.fast_1, l2.fast_2) == (3, 1, 1, 0.0, 0.0)
    assert l2.geomean_speedup == pytest.approx(1.0)
    assert (everything.problems, everything.compiled, everything.correct) == (6, 4, 3)
    assert everything.fast_1 == pytest.approx(2 / 6)
    assert everything.geomean_speedup == pytest.approx((1.5 * 2.5 * 1.0) ** (1 / 3))
    assert result.note is None


def test_a_fast_wrong_candidate_never_counts() -> None:
    fast_but_wrong = Verdict.failed("wrong", "wrong", compiled=True)
    fast_but_wrong.speedup = 10.0  # a wrong kernel can be very fast: it must still not count
    o = outcome(task("w", "level1", fast_but_wrong))
    assert not o.correct and o.speedup is None
    assert fast_p([o], 1.0) == 0.0


def test_without_a_gpu_nothing_is_invented(tasks: list[TaskRecord]) -> None:
    result = table(tasks, None, EAGER)
    assert result.note == NO_GPU_NOTE
    for row in result.rows:
        assert row.correct is None and row.fast_1 is None and row.fast_2 is None and row.geomean_speedup is None
        assert row.compiled is not None  # builds that were measured still count


def test_builds_that_could_not_be_tried_are_not_measured() -> None:
    not_built_here = Verdict.failed("no_gpu", "not run: no GPU (the candidate cannot be built here)")
    result = table([task("x", "level1", not_built_here)], None, EAGER)
    assert result.rows[0].compiled is None


def test_torch_compile_table_uses_the_profiled_best_candidate(tasks: list[TaskRecord]) -> None:
    assert table(tasks, "NVIDIA H200", TORCH_COMPILE) is None  # timed for no problem
    tasks[0].profile = None
    tasks[1] = task("b", "level1", correct(0.8), correct(2.5), profile_speedup_vs_compile=1.2)
    result = table(tasks, "NVIDIA H200", TORCH_COMPILE)
    rows = {r.level: r for r in result.rows}
    # "a" and "f" have a correct candidate but no torch.compile timing: standing unknown.
    assert "2 problem(s) left out" in result.note
    assert rows["level1"].problems == 2 and rows["level1"].correct == 1
    assert rows["level1"].fast_1 == pytest.approx(1 / 2) and rows["level1"].fast_2 == 0.0
    assert rows["level1"].geomean_speedup == pytest.approx(1.2)


def test_geometric_mean() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([]) is None


def measured(status: str, speedup: float, *, flags: list[str] | None = None) -> Verdict:
    """A verdict with every number measured, under a status that may say they prove nothing."""
    return replace(correct(speedup), status=status, extra={"flags": flags} if flags else {})


def test_only_proven_verdicts_count_and_the_rest_are_listed() -> None:
    tasks = [
        task("cheat", "level1", measured("suspicious", 25.0)),               # best candidate suspicious
        task("mixed", "level1", measured("impossible", 60.0), correct(1.5)),  # the proven one counts
        task("noisy", "level1", measured("unstable", 3.0), measured("unproven", 2.5)),
        task("flagged", "level2", measured("faster", 4.0, flags=["environment"])),
        task("honest", "level2", correct(2.5), wrong()),
    ]
    result = table(tasks, "NVIDIA H200", EAGER)
    rows = {r.level: r for r in result.rows}
    l1, l2, everything = rows["level1"], rows["level2"], rows[ALL_LEVELS]
    assert (l1.problems, l1.compiled, l1.correct) == (3, 3, 1)
    assert l1.fast_1 == pytest.approx(1 / 3) and l1.fast_2 == 0.0
    assert l1.geomean_speedup == pytest.approx(1.5)
    assert l1.not_counted == {"impossible": 1, "suspicious": 1, "unstable": 1, "unproven": 1}
    assert (l2.correct, l2.fast_2, l2.not_counted) == (1, 0.5, {"flagged": 1})
    assert everything.correct == 2 and everything.fast_1 == pytest.approx(2 / 5)
    assert everything.geomean_speedup == pytest.approx(math.sqrt(1.5 * 2.5))
    assert everything.not_counted == {"impossible": 1, "suspicious": 1, "unstable": 1, "unproven": 1, "flagged": 1}
    assert everything.to_json()["not_counted"] == everything.not_counted
    cheat = outcome(tasks[0])
    assert not cheat.correct and cheat.speedup is None and cheat.left_out == ("suspicious",)
    assert fast_p([cheat], 1.0) == 0.0


def test_the_rule_is_the_profilers_own() -> None:
    for verdict in (correct(2.0), correct(0.5), measured("suspicious", 30.0), measured("faster", 2.0, flags=["x"]),
                    wrong(), build_error()):
        assert counted(verdict.to_json()) == verdict.proven
    assert left_out(wrong().to_json()) is None and left_out(correct(2.0).to_json()) is None


def test_a_profile_of_a_candidate_that_does_not_count_gives_no_torch_compile_speedup() -> None:
    record = task("old", "level1", measured("suspicious", 30.0), profile_speedup_vs_compile=12.0)
    record.profile["verdict"]["status"] = "suspicious"  # a run profiled its suspicious best
    assert compile_speedup(record) is None
    assert table([record], "NVIDIA H200", TORCH_COMPILE) is None


def test_the_table_names_its_protocol_and_what_it_left_out() -> None:
    tasks = [task("a", "level1", measured("impossible", 90.0), measured("impossible", 80.0)),
             task("b", "level1", measured("suspicious", 20.0), measured("faster", 3.0, flags=["environment"]))]
    text = format_table(table(tasks, "NVIDIA H200", EAGER), gpu="NVIDIA H200", candidates=2, model="m",
                        baseline="eager PyTorch (Model)", protocol="dice")
    assert "protocol: dice" in text.splitlines()[0]
    header = next(line for line in text.splitlines() if line.strip().startswith("level"))
    assert header.rstrip().endswith("not counted")
    assert text.splitlines()[-1].rstrip().endswith("2 impossible, 1 suspicious, 1 flagged")
    assert verdict_words([measured("suspicious", 20.0).to_json()]) == "suspicious"
    assert verdict_words([measured("suspicious", 20.0).to_json(), correct(1.2).to_json()]) == "correct, 1.20x"
