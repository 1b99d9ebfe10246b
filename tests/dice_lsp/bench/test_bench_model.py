"""`dice bench` with a real (tiny, random) model on this machine: the no-GPU path end to end.

Whatever a random model writes is recorded and judged for real (it rarely parses); the
tests pin down that every candidate has its verdict, that the summary counts only what was
measured, and that nothing is invented without a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dice_lsp.bench.results import load
from dice_lsp.bench.stats import outcome
from dice_lsp.cli import main

pytestmark = pytest.mark.timeout(300)


def test_model_run_on_two_problems(
    control_problems: Path, tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    code = main(["bench", str(control_problems), "--model", str(tiny_checkpoint), "--candidates", "2",
                 "--max-tokens", "8", "--limit", "2", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["model"] == str(tiny_checkpoint) and summary["candidates"] == 2
    assert summary["gpu"] is None and summary["problems"] == 2

    run = load(out)
    # DICE's protocol by default: its decoder and sampling, whole blocks of 4 returned.
    assert run.settings["preset"] == "dice" and run.settings["temperature"] is None
    records = list(run.tasks.values())
    for record in records:
        assert record.state == "done", record.error
        assert len(record.candidates) == 2
        for candidate in record.candidates:
            assert 8 <= candidate.generation["tokens"] < 8 + 4
            assert candidate.verdict["correct"] is None and candidate.verdict["speedup"] is None
    (eager,) = summary["tables"]
    everything = eager["rows"][-1]
    assert everything["correct"] is None and everything["fast_1"] is None
    # The table's build count is the verdicts' own.
    builds = [outcome(r).compiled for r in records]
    expected = sum(b for b in builds if b is not None) if any(b is not None for b in builds) else None
    assert everything["compiled"] == expected


def test_infill_run_on_a_cuda_record(
    repo_root: Path, tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    saxpy = (repo_root / "examples" / "saxpy.cu").read_text()
    body = saxpy.index("{", saxpy.index("__global__")) + 1
    end = saxpy.index("}", body)
    records = tmp_path / "records.json"
    records.write_text(json.dumps([{
        "name": "saxpy-body", "level": "infill", "reference": "y = a * x + y",
        "prefix": saxpy[:body], "middle": saxpy[body:end], "suffix": saxpy[end:],
    }]))
    out = tmp_path / "out"
    code = main(["bench", "--infill", str(records), "--model", str(tiny_checkpoint), "--max-tokens", "8",
                 "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["mode"] == "infill" and summary["baseline"].startswith("the document with its true middle")
    record = load(out).tasks["saxpy-body"]
    assert record.state == "done" and record.path == "saxpy-body.cu" and record.level == "infill"
    (candidate,) = record.candidates
    verdict = candidate.verdict
    # nvcc judged the filled file for real: either it compiled (then no GPU to run it) or not.
    assert verdict["status"] in ("compile_error", "no_gpu", "wrong"), verdict["message"]
    if verdict["status"] == "compile_error":
        assert verdict["compiled"] is False and verdict["diagnostics"]
    assert verdict["correct"] is None or verdict["status"] == "wrong"


def test_a_model_that_cannot_load_stops_the_run_with_its_reason(
    control_problems: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["bench", str(control_problems), "--model", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "o")])
    assert code == 1
    assert "cannot load model" in capsys.readouterr().err


def test_temperature_follows_the_preset() -> None:
    from argparse import Namespace

    from dice_lsp.bench.run import sampling_temperature

    assert sampling_temperature(Namespace(temperature=None, preset="dice", candidates=4)) is None
    assert sampling_temperature(Namespace(temperature=0.3, preset="dice", candidates=1)) == 0.3
    # Several candidates are sampled, not greedy copies.
    assert sampling_temperature(Namespace(temperature=None, preset="default", candidates=2)) == 0.7
    assert sampling_temperature(Namespace(temperature=None, preset="default", candidates=1)) == 0.0
