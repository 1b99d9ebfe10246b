"""`dice check` and `dice profile` on a file they cannot judge say so and exit 2, instead of
"compiles, no diagnostics" for what nothing compiled. The real CLI in a subprocess, real nvcc."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest



@pytest.mark.parametrize("command", ["check", "profile"])
def test_a_file_neither_cuda_nor_python(dice, tmp_path: Path, command: str):
    path = tmp_path / "notes.txt"
    path.write_text("__global__ void k() {}\n")
    run = dice(command, str(path))
    assert run.returncode == 2
    assert run.stderr == ("dice: notes.txt: dice judges CUDA (.cu, .cuh) and KernelBench (.py) files, not .txt; "
                          "nothing was compiled\n")
    assert run.stdout == ""


@pytest.mark.parametrize("command", ["check", "profile"])
def test_a_python_file_without_model(dice, tmp_path: Path, command: str):
    path = tmp_path / "plain.py"
    path.write_text("import torch\n\nprint(torch.ones(2))\n")
    run = dice(command, str(path))
    assert run.returncode == 2
    assert "dice: plain.py: no `class Model`: a .py file is judged as a KernelBench problem" in run.stderr
    assert "compiles" not in run.stdout and "loaded" not in run.stdout


def test_a_python_file_of_load_inline_cuda_without_model_is_compiled_by_check(dice, tmp_path: Path):
    path = tmp_path / "ext.py"
    path.write_text("from torch.utils.cpp_extension import load_inline\nm = load_inline(name=\"x\", cpp_sources=\"\", "
                    "cuda_sources=\"__global__ void k(float* y) { y[0] = 1 }\")\n")
    run = dice("check", str(path))
    assert run.returncode == 1 and "error" in run.stdout, run  # the string compiled: its missing `;`
    assert dice("profile", str(path)).returncode == 2


def test_a_python_file_that_does_not_parse_is_still_checked(dice, tmp_path: Path):
    path = tmp_path / "broken.py"
    path.write_text("def f(:\n")
    run = dice("check", str(path))
    assert run.returncode == 1 and "broken.py:1:" in run.stdout


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
@pytest.mark.parametrize("command", ["check", "profile"])
def test_a_cu_file_without_a_kernel(dice, tmp_path: Path, command: str):
    path = tmp_path / "helpers.cu"
    path.write_text("__device__ float twice(float x) { return 2 * x; }\n")
    run = dice(command, str(path))
    assert run.returncode == 2
    assert "no __global__" in run.stderr
    assert "compiles, no diagnostics" not in run.stdout
