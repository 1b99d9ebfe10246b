"""One answer to "what is in this document" (profiler/source/document.py), whoever asks: the server
(targets, measured units, document analysis, the file watcher), `dice bench` (discovery) and
the profiler (check, judge, profile): a `.PY` file is KernelBench to every one of them."""

from __future__ import annotations

from pathlib import Path

import pytest

import profiler
from dice_lsp.bench.problems import discover
from dice_lsp.core.measured import measured_units, unit_to_profile
from dice_lsp.core.targets import TargetError, language_of, model_new_target
from dice_lsp.lsp.document_analysis import parse_document
from profiler.source.document import CUDA, KERNELBENCH, benchmark_class, kernelbench_classes, kind_of

PROBLEM = """\
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
"""

KINDS = {
    "relu.py": KERNELBENCH,
    "RELU.PY": KERNELBENCH,
    "relu.Py": KERNELBENCH,
    "k.cu": CUDA,
    "K.CU": CUDA,
    "k.cuh": CUDA,
    "notes.txt": None,
    "Makefile": None,
}


@pytest.mark.parametrize(("name", "kind"), KINDS.items())
def test_every_reader_agrees_on_the_kind(tmp_path: Path, name: str, kind: str | None):
    path = str(tmp_path / name)
    assert kind_of(path) == kind
    # the server
    if kind is None:
        with pytest.raises(TargetError):
            language_of(path)
    else:
        assert language_of(path) == kind
    assert parse_document(PROBLEM, path).language == kind
    assert bool(measured_units(PROBLEM, path)) == (kind == KERNELBENCH)
    # the profiler: KernelBench, or else CUDA
    assert profiler.is_kernelbench(path) == (kind == KERNELBENCH)
    # dice bench
    Path(path).write_text(PROBLEM, encoding="utf-8")
    problems, skipped = discover(tmp_path)
    assert [p.path.name for p in problems] == ([name] if kind == KERNELBENCH else []) and skipped == []


def test_an_upper_case_py_file_is_checked_as_python():
    """profiler.check of a `.PY` KernelBench file: Python's own error, not nvcc's on Python text."""
    (found,) = profiler.check("class Model(:\n", "/tmp/BROKEN.PY")
    assert found.message.startswith("SyntaxError") and found.line == 1


def test_model_and_model_new_are_found_once_for_all():
    source = PROBLEM + "\n\nclass ModelNew(Model):\n    pass\n"
    assert [c.name for c in kernelbench_classes(source)] == ["Model", "ModelNew"]
    assert benchmark_class(source).name == "ModelNew" and benchmark_class(PROBLEM).name == "Model"
    assert benchmark_class("class Model(:\n") is None
    # the span a job replaces, the unit results attach to, and the analysis's classes are
    # all that one ModelNew statement
    target = model_new_target(source)
    (unit,) = measured_units(source, "m.py")
    model_new = [(s, e) for name, s, e in parse_document(source, "m.py").model_classes if name == "ModelNew"]
    assert source[target.start:target.end].startswith("class ModelNew(Model):")
    assert (unit.name, unit.start, unit.end) == ("ModelNew", target.start, target.end)
    assert model_new == [(target.start, target.end)]


def test_what_profile_measures():
    """The kernel under the cursor in CUDA; the whole KernelBench file wherever the cursor is."""
    cuda = "__global__ void one(float* x) { x[0] = 1.0f; }\n\n__global__ void two(float* x) { x[0] = 2.0f; }\n"
    assert unit_to_profile(cuda, "k.CU", cuda.index("2.0f")).name == "two"
    with pytest.raises(TargetError, match="inside a __global__ function"):
        unit_to_profile(cuda, "k.cu", cuda.index("\n\n") + 1)
    assert unit_to_profile(PROBLEM, "relu.PY", 0).name == "Model"
    with pytest.raises(TargetError, match="KernelBench"):
        unit_to_profile(PROBLEM, "notes.txt", 0)
