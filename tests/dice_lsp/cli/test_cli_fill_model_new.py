"""`dice fill` inside the ModelNew of a KernelBench file that holds both Model and ModelNew: each
candidate is judged against Model (the baseline leaves ModelNew and its load_inline build out,
profiler.source.document.kernelbench_baseline), so on a machine without a GPU every candidate gets
the compile check's verdict, not a baseline that failed to build. The real CLI, the built-in
model, real nvcc."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PROBLEM = (REPO / "tests" / "data" / "kernelbench" / "level1" / "28_HardSigmoid.py").read_text()
# ModelNew's CUDA without torch's headers, so that nvcc's check of each candidate takes seconds.
MODEL_NEW = '''
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void hardsigmoid_kernel(const float* in, float* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        out[i] = fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    }
}
"""

ext = load_inline(name="dice_test_hardsigmoid", cpp_sources="", cuda_sources=cuda_source, functions=[])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.hardsigmoid(x)
'''


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_a_fill_inside_model_new_is_judged_against_model(child_env, tmp_path: Path, local_gpu):
    path = tmp_path / "28_HardSigmoid.py"
    path.write_text(PROBLEM + MODEL_NEW)
    line = (PROBLEM + MODEL_NEW).splitlines().index("        float x = in[i];") + 1
    run = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "fill", str(path), "--range", f"{line}:9-{line}:26",
                          "--candidates", "2", "--json"], capture_output=True, text=True, timeout=600,
                         env=child_env, check=False)
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer["candidates"]
    for candidate in answer["candidates"]:
        message = " ".join(d["message"] for d in candidate["diagnostics"])
        assert "baseline" not in candidate["message"] + message and "CUDA_HOME" not in message, candidate
        assert candidate["status"] != "error", candidate
        if local_gpu is None:
            # No GPU: nvcc's verdict on the candidate's CUDA (its errors at their lines in the
            # file), never a run (the no-GPU verdict of any KernelBench fill).
            assert candidate["status"] in ("compile_error", "no_gpu"), candidate
            assert candidate["correct"] is None and candidate["speedup"] is None
            if candidate["status"] == "compile_error":
                assert any(d["severity"] == "error" and line - 3 <= d["line"] <= line + 3
                           for d in candidate["diagnostics"]), candidate
    if local_gpu is None:
        assert answer["gpu"] is None
    assert path.read_text() == PROBLEM + MODEL_NEW
