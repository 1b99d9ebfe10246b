"""Finding KernelBench-format problems in a folder (read with ast, never imported)."""

from __future__ import annotations

from pathlib import Path

from dice_lsp.bench.problems import discover, level_of
from profiler.source.document import is_kernelbench_source


def test_discovers_every_problem_of_the_subset_with_its_level(kernelbench_dir: Path) -> None:
    problems, skipped = discover(kernelbench_dir)
    files = sorted(kernelbench_dir.rglob("*.py"))
    assert len(problems) == len(files) and not skipped
    assert {p.level for p in problems} == {"level1", "level2"}
    assert all(p.path.is_absolute() and p.source == p.path.read_text() for p in problems)
    names = [p.name for p in problems]
    assert len(set(names)) == len(names)
    # KernelBench order: level1 before level2, and 2_x before 10_x inside a level.
    level1 = [p.path.stem for p in problems if p.level == "level1"]
    numbers = [int(stem.split("_")[0]) for stem in level1]
    assert numbers == sorted(numbers)
    assert problems[0].level == "level1" and problems[-1].level == "level2"


def test_other_files_are_ignored_and_broken_problems_reported(tmp_path: Path, kernelbench_dir: Path) -> None:
    relu = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "relu_copy.py").write_text(relu)
    (tmp_path / "helpers.py").write_text("def get_inputs():\n    return []\n")  # no Model
    (tmp_path / "broken.py").write_text("class Model(nn.Module:\n    pass\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.py").write_text(relu)
    problems, skipped = discover(tmp_path)
    assert [(p.name, p.level) for p in problems] == [("mine/relu_copy", "other")]
    assert [s.path.name for s in skipped] == ["broken.py"]
    assert "syntax error line 1" in skipped[0].reason


def test_a_single_file_is_a_folder_of_one(kernelbench_dir: Path) -> None:
    problems, _ = discover(kernelbench_dir / "level2" / "12_Gemm_Multiply_LeakyReLU.py")
    assert [(p.name, p.level) for p in problems] == [("12_Gemm_Multiply_LeakyReLU", "level2")]


def test_level_comes_from_the_innermost_level_folder() -> None:
    assert level_of(Path("kb/level3/sub/x.py")) == "level3"
    assert level_of(Path("level1/level2/x.py")) == "level2"
    assert level_of(Path("levels/x.py")) == "other"


def test_kernelbench_source_needs_all_three_names() -> None:
    assert is_kernelbench_source("class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n")
    assert not is_kernelbench_source("class Model: pass\ndef get_inputs(): pass\n")
    assert not is_kernelbench_source("class Model(:\n")


def test_solutions_under_a_hidden_folder_are_found_but_hidden_folders_below_are_skipped(tmp_path: Path) -> None:
    from dice_lsp.bench.solutions import solution_files

    root = tmp_path / ".work" / "solutions"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "19_ReLU.correct.py").write_text("class ModelNew: ...\n")
    (root / ".git").mkdir()
    (root / ".git" / "19_ReLU.stale.py").write_text("class ModelNew: ...\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "19_ReLU.cpython.py").write_text("")
    found = solution_files(root)
    assert [p.name for p in found["19_ReLU"]] == ["19_ReLU.correct.py"]
