"""Putting a candidate ModelNew into a problem file (the span `dice optimize` replaces)."""

from __future__ import annotations

import ast
from pathlib import Path

from dice_lsp.bench.tasks import splice_model_new
from profiler.source.document import is_kernelbench_source, module_level_names

CANDIDATE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"


def _classes(source: str) -> list[str]:
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]


def test_appended_when_the_problem_has_no_model_new(kernelbench_dir: Path) -> None:
    problem = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    spliced = splice_model_new(problem, CANDIDATE)
    assert spliced.startswith(problem.rstrip("\n"))
    assert spliced.rstrip("\n").endswith(CANDIDATE.rstrip("\n"))
    assert _classes(spliced) == ["Model", "ModelNew"]
    assert is_kernelbench_source(spliced)


def test_replaces_an_existing_model_new_and_keeps_what_follows() -> None:
    problem = (
        "import torch\n\nclass Model(torch.nn.Module):\n    pass\n\n"
        "@decorated\nclass ModelNew(torch.nn.Module):\n    old = 1\n\n    def forward(self, x):\n        return x\n\n"
        "def get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n"
    )
    spliced = splice_model_new(problem, CANDIDATE)
    assert "old = 1" not in spliced and "@decorated" not in spliced
    assert _classes(spliced) == ["Model", "ModelNew"]
    assert {"get_inputs", "get_init_inputs"} <= module_level_names(spliced)
    assert spliced.index("class ModelNew") < spliced.index("def get_inputs")


def test_every_control_spliced_into_its_problem_is_a_whole_kernelbench_file(
    kernelbench_dir: Path, controls_dir: Path
) -> None:
    controls = sorted(controls_dir.rglob("*.py"))
    assert len(controls) >= 6
    for control in controls:
        level, stem = control.parent.name, control.name.split(".")[0]
        problem = (kernelbench_dir / level / f"{stem}.py").read_text()
        spliced = splice_model_new(problem, control.read_text())
        assert is_kernelbench_source(spliced), control
        assert _classes(spliced).count("ModelNew") == 1, control
