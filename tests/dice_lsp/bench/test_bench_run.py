"""`dice bench` end to end on this machine (no GPU): real profiler, real worker processes.

Candidates come from the hand-written controls (--solutions), so these tests need no model;
the model path is in test_bench_model.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dice_lsp.bench.results import load
from dice_lsp.cli import main

pytestmark = pytest.mark.timeout(300)


def bench(*argv: str) -> int:
    return main(["bench", *argv])


def test_solutions_run_records_every_verdict_and_invents_nothing(
    control_problems: Path, controls_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    code = bench(str(control_problems), "--solutions", str(controls_dir), "--out", str(out), "--limit", "2", "--json")
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["mode"] == "optimize" and summary["model"] is None
    assert summary["gpu"] is None and summary["problems"] == 2 and summary["errors"] == []
    assert summary["most_candidates"] == 2
    (eager,) = summary["tables"]  # torch.compile was not timed: no table for it
    assert eager["baseline"] == "eager" and eager["note"] == "not measured: no GPU"
    assert [r["level"] for r in eager["rows"]] == ["level1", "all"]
    for row in eager["rows"]:
        assert row["correct"] is None and row["fast_1"] is None and row["fast_2"] is None
        assert row["geomean_speedup"] is None
    assert summary["torch_compile"].startswith("not timed")

    run = load(out)
    assert list(run.tasks) == ["level1/19_ReLU", "level1/21_Sigmoid"]
    for record in run.tasks.values():
        assert record.state == "done"
        files = sorted(Path(c.generation["file"]).name for c in record.candidates)
        assert files == [f"{Path(record.path).stem}.correct.py", f"{Path(record.path).stem}.wrong.py"]
        for candidate in record.candidates:
            assert "class ModelNew" in candidate.text
            verdict = candidate.verdict
            assert verdict["status"] == "no_gpu" and verdict["correct"] is None and verdict["speedup"] is None
            assert "no GPU" in verdict["message"]
    png = Path(summary["chart"]).read_bytes()
    assert png.startswith(b"\x89PNG")


def test_resume_keeps_finished_problems_and_judges_generated_ones(
    control_problems: Path, controls_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
    stop_after_the_first_problem
) -> None:
    out = tmp_path / "out"
    args = [str(control_problems), "--solutions", str(controls_dir), "--out", str(out)]
    assert bench(*args, "--limit", "1") == 0
    stop_after_the_first_problem(out)
    capsys.readouterr()

    assert bench(*args, "--limit", "3", "--resume", "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["problems"] == 3
    run = load(out)
    assert list(run.tasks) == ["level1/19_ReLU", "level1/21_Sigmoid", "level2/12_Gemm_Multiply_LeakyReLU"]
    assert run.tasks["level1/19_ReLU"].candidates[0].verdict["message"] == "judged by the first run"
    (resumed,) = run.tasks["level1/21_Sigmoid"].candidates
    assert resumed.text.startswith("# from the stopped run") and resumed.verdict["status"] == "no_gpu"
    assert all(t.state == "done" for t in run.tasks.values())


def test_a_finished_run_is_not_overwritten_and_resume_needs_the_same_settings(
    control_problems: Path, correct_controls: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    args = [str(control_problems), "--solutions", str(correct_controls), "--out", str(out), "--limit", "1"]
    assert bench(*args) == 0
    capsys.readouterr()
    assert bench(*args) == 2
    assert "pass --resume" in capsys.readouterr().err
    assert bench(str(control_problems), "--out", str(out), "--resume", "--model", "some/checkpoint") == 2
    assert "cannot resume" in capsys.readouterr().err


def test_bad_input_gets_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "empty").mkdir()
    assert bench(str(tmp_path / "empty")) == 2
    assert "no KernelBench-format problem" in capsys.readouterr().err
    assert bench(str(tmp_path / "missing")) == 2
    assert "no such folder" in capsys.readouterr().err
    records = tmp_path / "records.json"
    records.write_text(json.dumps([{"prefix": "a", "suffix": "b"}]))
    assert bench("--infill", str(records)) == 2
    assert "record 0 lacks string field(s) reference, middle" in capsys.readouterr().err


def test_a_problem_that_breaks_is_recorded_and_the_run_goes_on(
    control_problems: Path, correct_controls: Path, tmp_path: Path
) -> None:
    # A problem whose Model cannot even be imported, next to a good one.
    broken = control_problems / "level1" / "19_ReLU.py"
    broken.write_text("import no_such_module_anywhere\n" + broken.read_text())
    out = tmp_path / "out"
    assert bench(str(control_problems), "--solutions", str(correct_controls), "--out", str(out), "--limit", "2") == 0
    run = load(out)
    assert [t.state for t in run.tasks.values()] == ["done", "done"]
    relu = run.tasks["level1/19_ReLU"].candidates[0].verdict
    assert relu["status"] in ("crash", "error", "no_gpu") and relu["correct"] is not True
    assert "no_such_module_anywhere" in json.dumps(relu)


def test_a_hostile_candidate_reaches_neither_the_bench_nor_its_results(
    control_problems: Path, correct_controls: Path, tmp_path: Path
) -> None:
    from profiler.sandbox import isolation_problem

    if (problem := isolation_problem()) is not None:
        pytest.skip(f"no unprivileged namespaces here: {problem}")
    import subprocess

    out = tmp_path / "out"
    planted = Path(__file__).resolve().parents[3] / "dice_lsp" / "planted_by_a_candidate.py"
    relu = control_problems / "level1" / "19_ReLU.py"
    hostile = correct_controls / "level1" / "19_ReLU.hostile.py"
    # It loads as a module (so it runs here, without a GPU): it kills every process it can
    # see or signal, and tries to forge the run's results and plant code in the package.
    hostile.write_text(f"""
import os, signal
for target in ({str(out / "results.json")!r}, {str(planted)!r}):
    try:
        with open(target, "w") as file:
            file.write('{{"forged": true}}')
    except OSError:
        pass
# Only where it is the first process of a PID namespace: should a bug leave it outside one,
# the assertions below fail instead of the test killing the machine's processes.
if os.getpid() == 1:
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
""" + (correct_controls / "level1" / "19_ReLU.correct.py").read_text())
    sentinel = subprocess.Popen(["sleep", "600"])
    try:
        assert bench(str(relu), "--solutions", str(correct_controls), "--out", str(out)) == 0
        assert sentinel.poll() is None, "the candidate killed a process outside its sandbox"
    finally:
        sentinel.kill()
        sentinel.wait()
    assert not planted.exists()
    run = load(out)  # the results are the bench's own, not the forged file
    (record,) = run.tasks.values()
    assert record.state == "done" and len(record.candidates) == 2
    for candidate in record.candidates:
        assert candidate.verdict["extra"]["isolation"] == "namespaces"
        assert candidate.verdict["status"] == "no_gpu"  # both load; no GPU to time them
