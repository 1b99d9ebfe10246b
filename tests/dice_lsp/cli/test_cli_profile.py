"""`dice check` and `dice profile` through the real command line, on a machine without a GPU
(the GPU side is in tests/profiler/judging/test_gpu_cuda_judge.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import profiler
from profiler.checks.compile import find_nvcc

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
no_gpu_here = pytest.mark.skipif(profiler.gpu_name() is not None, reason="checks the no-GPU answer")


def dice(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@needs_nvcc
def test_check_json_on_a_compile_error(tmp_path):
    path = tmp_path / "broken.cu"
    path.write_text("__global__ void k(float* y)\n{\n    y[0] = nope;\n}\n")
    out = dice("check", str(path), "--json")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert data == {"diagnostics": [
        {"line": 3, "column": 12, "severity": "error", "message": 'identifier "nope" is undefined'}]}


@needs_nvcc
def test_check_human_output_and_spec_errors(tmp_path, repo_root):
    out = dice("check", str(repo_root / "examples" / "saxpy.cu"))
    assert out.returncode == 0 and "no diagnostics" in out.stdout
    path = tmp_path / "bad_spec.cu"
    path.write_text("// dice: launch grid=n\n__global__ void k(float* y) { }\n")
    out = dice("check", str(path))
    assert out.returncode == 1
    assert f"{path}:1:22: error: dice spec: expected a name bound by `let`" in out.stdout


@needs_nvcc
@no_gpu_here
def test_profile_without_gpu_compiles_and_invents_no_numbers(repo_root):
    out = dice("profile", str(repo_root / "examples" / "row_sum.cu"), "--json")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert data["status"] == "no_gpu" and data["compiled"] is True
    assert data["message"] == "compiles; not timed: no GPU"
    assert all(data[key] is None for key in ("correct", "speedup", "speedup_ci", "time_ms", "baseline_ms"))
    table = dice("profile", str(repo_root / "examples" / "row_sum.cu"))
    assert "not timed: no GPU" in table.stdout and "speedup    -" in table.stdout


@needs_nvcc
def test_profile_compile_error_and_missing_spec(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("// dice: let n = 4\n// dice: buffer y[n]\n// dice: launch grid=1, block=4\n"
                    "__global__ void k(float* y, int n) { y[0] = nope; }\n")
    out = dice("profile", str(path), "--json")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert data["status"] == "compile_error" and data["compiled"] is False
    assert data["diagnostics"][0]["line"] == 4
    path.write_text("__global__ void k(float* y, int n) { y[0] = 1; }\n")
    out = dice("profile", str(path))
    assert out.returncode == 1 and "Add benchmark spec" in out.stdout


@needs_nvcc
def test_a_file_that_is_not_utf8_is_checked_with_a_warning_at_the_bad_byte(tmp_path):
    path = tmp_path / "latin1.cu"
    original = "// scale\n// caf\xe9 au lait\n__global__ void k(float* y) { y[0] = nope; }\n".encode("latin-1")
    path.write_bytes(original)
    out = dice("check", str(path), "--json")
    assert out.returncode == 1, out.stderr
    warning, error = json.loads(out.stdout)["diagnostics"]
    assert (warning["line"], warning["column"], warning["severity"]) == (2, 7, "warning")
    assert "not UTF-8: byte 0xe9" in warning["message"]
    assert error["line"] == 3 and "nope" in error["message"]  # the rest of the file is still checked
    profiled = dice("profile", str(path))
    assert "Traceback" not in profiled.stderr and f"{path}:2:7: warning: not UTF-8" in profiled.stderr
    assert path.read_bytes() == original


def test_a_cache_folder_that_is_a_file_is_a_one_line_error(tmp_path, kernelbench_dir):
    (tmp_path / "cache").write_text("not a folder")
    done = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "profile", str(kernelbench_dir / "level1" / "19_ReLU.py")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path / 'cache'} is a file, not a folder" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_usage_errors_exit_2(tmp_path, repo_root):
    assert dice("check", str(tmp_path / "missing.cu")).returncode == 2
    out = dice("profile", str(repo_root / "examples" / "saxpy.cu"), "--kernel", "nope")
    assert out.returncode == 2 and "no __global__ function named 'nope'" in out.stderr


@no_gpu_here
def test_profile_kernelbench_file_without_gpu(kernelbench_dir):
    out = dice("profile", str(kernelbench_dir / "level1" / "19_ReLU.py"), "--json")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert data["status"] == "no_gpu" and data["time_ms"] is None and data["speedup"] is None


def test_only_a_proven_verdict_or_nothing_to_time_exits_fine():
    from dataclasses import replace

    from dice_lsp.cli.profile import exit_code
    from profiler.verdict.types import NOT_PROOF, Verdict

    faster = Verdict("faster", True, True, 1.8, (1.7, 1.9), 0.1, 0.18, [], "1.80x faster", inputs_checked=4,
                     gpu="NVIDIA H100")
    assert exit_code(faster) == 0 and exit_code(replace(faster, status="not_faster", speedup=0.9)) == 0
    assert exit_code(Verdict.failed("no_gpu", "compiles; not timed: no GPU", compiled=True)) == 0
    assert exit_code(replace(faster, extra={"flags": ["environment"]})) == 1
    for status in NOT_PROOF:
        assert exit_code(replace(faster, status=status)) == 1
    assert exit_code(Verdict.failed("wrong", "wrong on input set 1", compiled=True)) == 1
