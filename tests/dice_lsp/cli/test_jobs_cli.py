"""`dice fill` / `dice optimize` as a user runs them: a subprocess, the real engine worker with a
tiny checkpoint, the real profiler. The file is never modified."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dice_lsp.cli.jobs import what_became_of
from profiler.verdict.types import Verdict

REPO = Path(__file__).resolve().parents[3]
SAXPY = (REPO / "examples" / "saxpy.cu").read_text()


def test_fill_json(dice, tmp_path: Path, tiny_checkpoint: Path, local_gpu):
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    run = dice("fill", str(path), "--range", "12:9-12:32", "--candidates", "2", "--max-tokens", "8", "--model", str(tiny_checkpoint), "--json")
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert set(answer) >= {"candidates", "best", "gpu"}
    # The tiny model's candidates never compile, so none is best, GPU or not.
    assert answer["best"] is None and answer["best_text"] is None
    assert answer["gpu"] in (None, local_gpu)
    assert answer["range"] == {"start": {"line": 12, "column": 9}, "end": {"line": 12, "column": 32}}
    assert 1 <= len(answer["candidates"]) <= 2
    for candidate in answer["candidates"]:
        assert set(candidate) >= {"text", "compiled", "correct", "speedup", "time_ms", "baseline_ms", "diagnostics"}
        assert candidate["speedup"] is None and candidate["time_ms"] is None, "nothing invented for code that did not run"
        for d in candidate["diagnostics"]:
            assert set(d) == {"line", "column", "severity", "message"} and d["line"] >= 1
    assert path.read_text() == SAXPY
    assert run.stderr == "", "no progress bar when stderr is not a terminal"


def test_optimize_table(dice, tmp_path: Path, tiny_checkpoint: Path):
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    run = dice("optimize", str(path), "--kernel", "saxpy", "--candidates", "1", "--max-tokens", "4", "--model", str(tiny_checkpoint))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(" #  status ")
    # The tiny model's candidate never compiles: the summary says so, not "no GPU".
    assert "no candidate applies (it did not compile); the file is unchanged" in run.stdout
    assert "--- candidate 1 ---" in run.stdout
    assert path.read_text() == SAXPY


def test_bad_requests_say_why(dice, tmp_path: Path):
    path = tmp_path / "two.cu"
    path.write_text(SAXPY + SAXPY.replace("saxpy", "saxpy2"))
    run = dice("optimize", str(path))
    assert run.returncode == 2 and "several kernels (saxpy, saxpy2)" in run.stderr
    run = dice("fill", str(path), "--range", "12:9")
    assert run.returncode == 2 and "expected L:C-L:C" in run.stderr
    run = dice("fill", str(path), "--range", "99:1-99:2")
    assert run.returncode == 2 and "outside the file" in run.stderr
    lines = SAXPY.count("\n")  # the file ends with a newline: `wc -l` and editors say this many lines
    run = dice("fill", str(tmp_path / "two.cu"), "--range", f"{2 * lines + 2}:1-{2 * lines + 2}:2")
    assert run.returncode == 2 and f"outside the file ({2 * lines} lines)" in run.stderr, run.stderr
    run = dice("fill", str(tmp_path / "missing.cu"), "--range", "1:1-1:2")
    assert run.returncode == 2 and "cannot read" in run.stderr


def test_missing_model_says_how_to_pass_one(dice, tmp_path: Path):
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    run = dice("fill", str(path), "--range", "12:9-12:32", "--model", str(tmp_path / "nowhere"))
    assert run.returncode == 1
    assert "Pass --model \"builtin\"" in run.stderr


def test_a_range_that_cuts_a_statement_gets_fills_inside_its_function(dice, tmp_path: Path):
    """The built-in model on `y[i] = a * ` of saxpy's `y[i] = a * x[i] + y[i];`: it tends to
    write the statement, close the function and start another; every candidate stays inside."""
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    run = dice("fill", str(path), "--range", "12:9-12:20", "--json")
    assert run.returncode == 0, run.stderr
    for candidate in json.loads(run.stdout)["candidates"]:
        assert "__global__" not in candidate["text"] and "\n}" not in candidate["text"], candidate["text"]


def _verdicts(*statuses: str) -> list[Verdict]:
    return [dataclasses.replace(Verdict.failed(status, status, compiled=status != "compile_error"),
                                correct=True if status == "not_faster" else None if status != "wrong" else False)
            for status in statuses]


@pytest.mark.parametrize(("statuses", "summary"), [
    (("compile_error",), "it did not compile"),
    (("compile_error", "compile_error", "compile_error"), "none compiled"),
    (("no_gpu",), "compiled, not timed: no GPU"),
    (("no_gpu", "no_gpu"), "all compiled, none timed: no GPU"),
    (("wrong", "wrong", "compile_error"), "none correct: 2 compiled but gave wrong results, 1 did not compile"),
    (("compile_error", "no_gpu", "compile_error"), "2 did not compile, 1 compiled but not run or timed: no GPU"),
    (("not_faster", "wrong"), "1 correct but not faster, 1 compiled but gave wrong results"),
])
def test_the_summary_says_what_became_of_the_candidates(statuses, summary):
    assert what_became_of(_verdicts(*statuses)) == summary
