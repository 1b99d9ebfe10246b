"""Fixtures for `dice bench` tests: small problem folders copied from the KernelBench subset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

# Problems that have hand-written controls in benchmarks/kernelbench_controls.
CONTROL_PROBLEMS = ("level1/19_ReLU.py", "level1/21_Sigmoid.py", "level2/12_Gemm_Multiply_LeakyReLU.py")


def copy_problems(kernelbench_dir: Path, target: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(kernelbench_dir / name, target / name)
    return target


@pytest.fixture
def control_problems(kernelbench_dir: Path, tmp_path: Path) -> Path:
    return copy_problems(kernelbench_dir, tmp_path / "problems", CONTROL_PROBLEMS)


@pytest.fixture
def controls_dir(repo_root: Path) -> Path:
    return repo_root / "benchmarks" / "kernelbench_controls"


@pytest.fixture
def correct_controls(controls_dir: Path, tmp_path: Path) -> Path:
    """Only the correct controls: one candidate per problem, for tests that need no pair."""
    folder = tmp_path / "correct-controls"
    for control in controls_dir.rglob("*.correct.py"):
        (folder / control.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(control, folder / control.parent.name / control.name)
    return folder


@pytest.fixture
def stop_after_the_first_problem(controls_dir: Path, control_problems: Path):
    """stop(out): leave `out`'s results as a run stopped after its first problem would: the
    finished one marked (so that judging it again would show), the next one generated but not
    judged."""

    def stop(out: Path) -> None:
        data = json.loads((out / "results.json").read_text())
        data["problems"][0]["candidates"][0]["verdict"]["message"] = "judged by the first run"
        sigmoid = (controls_dir / "level1" / "21_Sigmoid.correct.py").read_text()
        data["problems"].append({
            "name": "level1/21_Sigmoid", "level": "level1", "path": str(control_problems / "level1" / "21_Sigmoid.py"),
            "state": "generated", "candidates": [{"text": "# from the stopped run\n" + sigmoid, "generation": {}}],
        })
        (out / "results.json").write_text(json.dumps(data))

    return stop
