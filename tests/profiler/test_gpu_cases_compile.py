"""The documents the GPU tests judge are valid here already: every .cu case compiles with
nvcc (so a GPU test fails for what it tests, not for a typo), and every KernelBench case
parses."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import profiler
from profiler.checks.compile import find_nvcc


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cuda_cases = _load("cuda_cases")
kernelbench_cases = _load("kernelbench_cases")

CUDA_DOCUMENTS = ["BASELINE", "FASTER", "WRONG", "WRITES_NOTHING", "WRITES_HALF", "CACHES_FIRST_RESULT",
                  "LOWER_PRECISION", "ILLEGAL_ADDRESS", "INFINITE_LOOP", "CHANGED_SIGNATURE"]


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", CUDA_DOCUMENTS)
def test_cuda_case_compiles_and_has_a_spec(name):
    source = getattr(cuda_cases, name)
    errors = [d for d in profiler.check(source, "square.cu") if d.severity == "error"]
    assert errors == []
    assert "square" in profiler.parse_spec(source)


def test_kernelbench_cases_parse(kernelbench_dir):
    problem = (kernelbench_dir / "level1" / "12_Matmul_with_diagonal_matrices_.py").read_text()
    documents = [
        kernelbench_cases.diag_mul_candidate(problem, kernelbench_cases.DIAG_RIGHT_ROW, "n"),
        kernelbench_cases.gemm_candidate(problem, "multiplier", "n"),
        kernelbench_cases.RELU_PROBLEM + kernelbench_cases.SIDE_STREAM_NEW,
        kernelbench_cases.RELU_PROBLEM + kernelbench_cases.CACHING_NEW,
        kernelbench_cases.RELU_PROBLEM + kernelbench_cases.HONEST_NEW,
    ]
    for document in documents:
        assert profiler.check(document, "problem.py") == []
        assert "class ModelNew" in document
