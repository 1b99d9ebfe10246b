"""The KernelBench judge on a real GPU: hand-written ModelNew (load_inline CUDA) against real
problems, right and wrong; Python-level cheats; a build error mapped to the document.
Needs ninja for load_inline (`pip install ninja`); the tests say so if it is missing.
"""

from __future__ import annotations

import importlib.util
import shutil
import uuid
from pathlib import Path

import pytest

import profiler
from profiler.judging.problem import build_jobs

_spec = importlib.util.spec_from_file_location("kernelbench_cases",
                                               Path(__file__).parent.parent / "kernelbench_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def ninja_present():
    # torch's load_inline runs `ninja --version`: the binary must be on PATH.
    if shutil.which("ninja") is None:
        pytest.fail("load_inline needs ninja on PATH: pip install ninja (with --target DIR, add DIR/bin to PATH)")


def unique(name: str) -> str:
    """A fresh extension name per run, so that a build is really exercised."""
    return f"{name}_{uuid.uuid4().hex[:8]}"


def judge(problem: str, candidates: list[str], time_limit: float = 300.0,
          progress: list[int] | None = None) -> list[profiler.Verdict]:
    on_progress = None if progress is None else (lambda index, total: progress.append(index))
    verdicts = profiler.judge(problem, candidates, "problem.py", time_limit=time_limit, on_progress=on_progress)
    for v in verdicts:
        print(v.status, v.message)
    return verdicts


def test_diag_matmul_right_and_wrong(kernelbench_dir):
    problem = (kernelbench_dir / "level1" / "12_Matmul_with_diagonal_matrices_.py").read_text()
    progress: list[int] = []
    right, wrong = judge(problem, [
        cases.diag_mul_candidate(problem, cases.DIAG_RIGHT_ROW, unique("diag_right")),
        cases.diag_mul_candidate(problem, cases.DIAG_WRONG_ROW, unique("diag_wrong")),
    ], progress=progress)
    assert right.correct is True and right.status in ("faster", "not_faster")
    assert right.time_ms > 0 and right.baseline_ms > 0 and right.speedup_ci is not None
    assert right.inputs_checked >= 4
    assert "eager PyTorch Model" in right.message
    assert right.extra["signed_inputs"] is True  # torch.rand inputs were also tried in [-1, 1)
    assert wrong.status == "wrong" and wrong.correct is False
    if build_jobs(2) == 2:
        # Both were built side by side first (with the GPU hidden); judging found the builds.
        assert progress == [0, 1, 2]
        builds = [b for v in (right, wrong) for b in v.extra["builds"]]
        assert len(builds) == 2 and all(b["cached"] for b in builds), builds


def test_gemm_with_weights_copied_right_and_wrong(kernelbench_dir):
    problem = (kernelbench_dir / "level2" / "12_Gemm_Multiply_LeakyReLU.py").read_text()
    right, wrong = judge(problem, [
        cases.gemm_candidate(problem, "multiplier", unique("gemm_right")),
        cases.gemm_candidate(problem, "1.0f", unique("gemm_wrong")),  # forgets the multiplier
    ])
    assert right.correct is True, right.message
    assert "weights" not in right.extra  # every parameter was copied from Model
    assert wrong.status == "wrong"


def test_cheat_on_another_stream_escapes_no_timer():
    (v,) = judge(cases.RELU_PROBLEM, [cases.RELU_PROBLEM + cases.SIDE_STREAM_NEW])
    assert not v.proven, v.message
    if v.status == "wrong":
        # Its output is written on its own stream, which the caller's stream never waits for:
        # a timed run's output, copied on the caller's stream at once, can be read before it is
        # written (seen on an H100 with other judgings sharing the GPU).
        assert "timed on" in v.message, v.message
    else:
        # Read after a device synchronize its outputs are right; the work it hid is charged.
        assert v.correct is True and "escaped_timer" in v.extra["flags"]
        assert v.status == "suspicious" and "another stream or thread" in v.message, v.message


def test_cheat_returning_the_first_result():
    (v,) = judge(cases.RELU_PROBLEM, [cases.RELU_PROBLEM + cases.CACHING_NEW])
    # Caught on the first input set already: what it returned the first time is poisoned before
    # its second run, which returns that memory again.
    assert v.status == "wrong" and "input set 1" in v.message, v.message


def test_honest_candidate_is_not_flagged_and_profile_adds_torch_compile():
    (v,) = judge(cases.RELU_PROBLEM, [cases.RELU_PROBLEM + cases.HONEST_NEW])
    assert v.correct is True and "escaped_timer" not in v.extra.get("flags", []), v.message
    assert v.status in ("faster", "not_faster") and v.proven
    profiled = profiler.profile(cases.RELU_PROBLEM + cases.HONEST_NEW, "relu.py", time_limit=300.0)
    print(profiled.message, profiled.extra.get("torch_compile"))
    assert profiled.correct is True
    assert "compile_ms" in profiled.extra or "torch_compile" in profiled.extra
    if "compile_ms" in profiled.extra:
        assert profiled.extra["speedup_vs_compile"] > 0 and "torch.compile" in profiled.message


def test_judgings_side_by_side_take_turns_on_the_gpu():
    """The language server runs jobs side by side. Three judgings of one honest candidate at
    once time one run at a time, so each verdict is what it is alone: proven, unflagged."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:
        verdicts = [v for vs in pool.map(lambda _: judge(cases.RELU_PROBLEM, [cases.RELU_PROBLEM + cases.HONEST_NEW]),
                                         range(3)) for v in vs]
    for v in verdicts:
        assert v.correct is True and not v.extra.get("flags"), v.message
        assert v.status in ("faster", "not_faster") and v.proven, v.message


def test_build_error_points_into_the_cuda_string(kernelbench_dir):
    problem = (kernelbench_dir / "level1" / "12_Matmul_with_diagonal_matrices_.py").read_text()
    broken = cases.diag_mul_candidate(problem, cases.DIAG_RIGHT_ROW, unique("diag_broken")).replace(
        "out[idx] = a[idx / m] * b[idx];", "out[idx] = a[idx / m] * undefined_thing;")
    (v,) = judge(problem, [broken])
    assert v.status == "compile_error", v.message
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "undefined_thing" in text)
    assert any(d.line == line for d in v.diagnostics), v.diagnostics


def test_crash_in_model_new_is_contained_and_the_next_is_judged():
    crashing = cases.RELU_PROBLEM + cases.HONEST_NEW.replace(
        "return torch.clamp_min(x, 0.0)", "import ctypes; ctypes.string_at(0)")
    crash, ok = judge(cases.RELU_PROBLEM, [crashing, cases.RELU_PROBLEM + cases.HONEST_NEW])
    assert crash.status == "crash"
    assert ok.correct is True
