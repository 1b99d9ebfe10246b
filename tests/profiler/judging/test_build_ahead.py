"""Building KernelBench candidates ahead of judging them: how many builds run at once, the
architecture a build with the GPU hidden is made for, and the record that tells a build
from a cache hit (built for real with torch's load_inline and the machine's compiler)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.judging.problem import BUILD_JOBS_ENV, build_jobs, half_the_cpus
from profiler.run.kernelbench import pin_cuda_arch

REPO = Path(__file__).resolve().parents[3]

# A C++-only extension: load_inline builds it with the host compiler, so this runs on any
# machine with a compiler and ninja (the CUDA case runs on the device: test_gpu_kernelbench_judge).
DOCUMENT = '''
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="dice_build_record", cpp_sources="int twice(int x) { return 2 * x; }",
                  functions=["twice"])
assert ext.twice(21) == 42
'''

LOAD = '''
import json, sys
from profiler.run.kernelbench import BUILDS, load_document
load_document(sys.stdin.read(), "problem.py", "dice_candidate")
print(json.dumps(BUILDS))
'''


def test_build_jobs_follow_the_setting_and_never_exceed_the_candidates(monkeypatch):
    monkeypatch.setenv(BUILD_JOBS_ENV, "3")
    assert build_jobs(8) == 3
    assert build_jobs(2) == 2
    for off in ("1", "0"):
        monkeypatch.setenv(BUILD_JOBS_ENV, off)
        assert build_jobs(8) == 1  # one at a time: building ahead is off
    monkeypatch.setenv(BUILD_JOBS_ENV, "lots")  # not a number: the default, half the CPUs
    assert build_jobs(64) == min(64, half_the_cpus()) == min(64, max(1, len(os.sched_getaffinity(0)) // 2))


def test_arch_is_pinned_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    pin_cuda_arch("9.0")
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "9.0+PTX"  # what torch picks for a visible 9.0 GPU
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    pin_cuda_arch("9.0")
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    pin_cuda_arch(None)  # no GPU known: torch decides
    assert "TORCH_CUDA_ARCH_LIST" not in os.environ


@pytest.mark.slow
def test_a_second_process_finds_the_build_in_the_extension_cache(tmp_path):
    pytest.importorskip("ninja", reason="load_inline needs ninja: pip install ninja")
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions"), "PYTHONPATH": str(REPO),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}

    def load() -> list[dict]:
        done = subprocess.run([sys.executable, "-c", LOAD], input=DOCUMENT, capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    (first,) = load()
    assert first["name"] == "dice_build_record" and first["cached"] is False and first["seconds"] > 0
    assert set(first["steps"]) == {"main.o", "dice_build_record.so"}  # ninja's steps, compile then link
    assert first["steps"]["main.o"][1] <= first["steps"]["dice_build_record.so"][0] + 1e-3
    (second,) = load()
    assert second["cached"] is True and second["steps"] == {}, second
