"""The .cu judge on a real GPU: a faster kernel, a wrong one, every known cheat, a fault and
a hang (each followed by a candidate that must still be judged). Run on the device machine:
    python -m pytest tests/profiler -m gpu -v
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import profiler

_spec = importlib.util.spec_from_file_location("cuda_cases", Path(__file__).parent.parent / "cuda_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

pytestmark = pytest.mark.gpu
PATH = "square.cu"


def judge_one(candidate: str, time_limit: float = 60.0) -> profiler.Verdict:
    (verdict,) = profiler.judge(cases.BASELINE, [candidate], PATH, time_limit=time_limit)
    print(verdict.status, verdict.message)
    return verdict


def test_coalesced_rewrite_is_correct_and_faster():
    v = judge_one(cases.FASTER)
    assert v.status == "faster", v.message
    assert v.correct is True and v.inputs_checked >= 4
    assert v.speedup > 1.5 and v.speedup_ci[0] > 1.0 and v.speedup_ci[0] <= v.speedup <= v.speedup_ci[1]
    assert v.time_ms > 0 and v.baseline_ms > v.time_ms
    assert v.gpu and v.kernel == "square"
    assert v.registers is not None and v.registers > 0
    assert 0 < v.bandwidth_gbs <= 1.1 * v.peak_bandwidth_gbs
    assert v.extra["timing"]["runs"] >= 20
    assert v.extra["clocks_mhz"] is None or v.extra["clocks_mhz"]["sm"] > 0


def test_wrong_kernel_is_wrong_thanks_to_signed_inputs():
    v = judge_one(cases.WRONG)
    assert v.status == "wrong" and v.correct is False
    assert "elements off by more than" in v.message
    assert v.speedup is None and v.time_ms is None


def test_cheat_writes_nothing():
    v = judge_one(cases.WRITES_NOTHING)
    assert v.status == "wrong"
    assert "16777216 of 16777216 elements not written" in v.message


def test_a_kernel_that_writes_into_its_const_input_is_wrong():
    v = judge_one(cases.WRITES_CONST_INPUT)
    assert v.status == "wrong" and v.correct is False
    assert "x: the kernel wrote into this const input" in v.message


def test_cheat_writes_half_the_output():
    v = judge_one(cases.WRITES_HALF)
    assert v.status == "wrong"
    assert "8388608 of 16777216 elements not written" in v.message


def test_cheat_replays_its_first_result():
    v = judge_one(cases.CACHES_FIRST_RESULT)
    assert v.status == "wrong"
    assert "input set 2" in v.message  # right on the first set, caught on the second


def test_cheat_lowers_precision_past_the_tolerance():
    v = judge_one(cases.LOWER_PRECISION)
    assert v.status == "wrong"
    assert "rtol=0.0001" in v.message


def test_changed_signature_is_refused_before_running():
    v = judge_one(cases.CHANGED_SIGNATURE)
    assert v.status == "wrong" and "changed the signature" in v.message


def test_fault_and_hang_are_verdicts_and_the_next_candidate_is_judged():
    verdicts = profiler.judge(cases.BASELINE, [cases.ILLEGAL_ADDRESS, cases.INFINITE_LOOP, cases.FASTER],
                              PATH, time_limit=30.0)
    for v in verdicts:
        print(v.status, v.message)
    fault, hang, good = verdicts
    assert fault.status == "crash" and "illegal" in fault.message.lower()
    assert hang.status == "timeout"
    assert good.status == "faster" and good.correct is True


def test_profile_times_the_document_alone(repo_root):
    source = (repo_root / "examples" / "row_sum.cu").read_text()
    v = profiler.profile(source, "row_sum.cu")
    print(v.message)
    assert v.status == "not_faster" and v.correct is None and v.speedup is None
    assert v.time_ms > 0 and v.baseline_ms is None
    assert v.shared_bytes >= 1024  # the launch's dynamic shared memory counts
    assert v.bandwidth_gbs > 0 and v.peak_bandwidth_gbs > v.bandwidth_gbs / 1.1


def test_compile_error_in_candidate_has_document_lines():
    broken = cases.FASTER.replace("y[i] = x[i] * x[i];", "y[i] = x[i] * undefined_thing;")
    v = judge_one(broken)
    assert v.status == "compile_error"
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "undefined_thing" in text)
    assert any(d.line == line and d.severity == "error" for d in v.diagnostics)
