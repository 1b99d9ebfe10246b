"""The two bench variants: what is judged for an optimize problem and for an infill record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dice_lsp.bench.problems import discover
from dice_lsp.bench.tasks import InfillFileError, OptimizeTask, infill_tasks
from profiler.source.document import is_kernelbench_source


def test_optimize_task_judges_the_problem_against_itself_with_model_new_added(control_problems: Path) -> None:
    problems, _ = discover(control_problems)
    task = OptimizeTask.from_problem(problems[0])
    assert task.baseline == problems[0].source and task.path.endswith("19_ReLU.py")
    document = task.document("class ModelNew(Model):\n    pass\n")
    assert document.startswith(task.source.rstrip("\n")) and is_kernelbench_source(document)


def test_infill_records_of_each_kind(kernelbench_dir: Path, controls_dir: Path, repo_root: Path, tmp_path: Path) -> None:
    problem = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    control = (controls_dir / "level1" / "19_ReLU.correct.py").read_text()
    hole = control.index("fmaxf(v.x, 0.0f)")
    saxpy = (repo_root / "examples" / "saxpy.cu").read_text()
    body = saxpy.index("{", saxpy.index("__global__")) + 1
    records = [
        # The ModelNew part only: it runs inside the reference, the KernelBench problem.
        {"name": "relu", "level": "level1", "reference": problem,
         "prefix": control[:hole], "middle": "fmaxf(v.x, 0.0f)", "suffix": control[hole + 16:]},
        # A whole KernelBench file with the hole in its ModelNew.
        {"reference": problem, "prefix": problem + "\n" + control[:hole], "middle": "fmaxf(v.x, 0.0f)",
         "suffix": control[hole + 16:]},
        # CUDA with a dice: spec, judged against its true middle.
        {"name": "saxpy", "reference": "y = a * x + y", "prefix": saxpy[:body], "middle": "",
         "suffix": saxpy[body:]},
    ]
    path = tmp_path / "records.json"
    path.write_text(json.dumps({"records": records}))
    relu, whole, cuda = infill_tasks(path)

    assert (relu.name, relu.level, relu.path, relu.in_reference) == ("relu", "level1", "relu.py", True)
    assert relu.baseline.startswith(problem.rstrip("\n")) and control.strip() in relu.baseline
    filled = relu.document("fmaxf(v.x, 1.0f)")
    assert "fmaxf(v.x, 1.0f)" in filled and is_kernelbench_source(filled)

    assert (whole.name, whole.level, whole.path, whole.in_reference) == ("record1", "other", "record1.py", False)
    assert whole.baseline == problem + "\n" + control

    assert (cuda.path, cuda.in_reference) == ("saxpy.cu", False)
    assert cuda.baseline == saxpy and cuda.document("x") == saxpy[:body] + "x" + saxpy[body:]


@pytest.mark.parametrize("content, message", [
    ("not json", "not JSON"),
    ("[]", "non-empty JSON list"),
    ("[1]", "record 0 is not an object"),
    ('[{"reference": "", "prefix": "", "middle": 3, "suffix": ""}]', "lacks string field(s) middle"),
])
def test_bad_infill_files_say_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "records.json"
    path.write_text(content)
    with pytest.raises(InfillFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        infill_tasks(path)
