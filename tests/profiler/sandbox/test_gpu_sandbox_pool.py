"""The sandbox pool on a real GPU: the same candidates judged with the pool off (each process
started at its turn, as before it) and on (pre-started processes, nvcc checks ahead, inputs
drawn on the device) get the same verdicts, and the pooled runs really came from spares.
Run on the device machine:
    python -m pytest tests/profiler/sandbox/test_gpu_sandbox_pool.py -m gpu -v
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import profiler
from profiler.sandbox import pool

_spec = importlib.util.spec_from_file_location("cuda_cases", Path(__file__).parent.parent / "cuda_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

pytestmark = pytest.mark.gpu
PATH = "square.cu"
BROKEN = cases.FASTER.replace("y[i] = x[i] * x[i];", "y[i] = x[i] * undefined_thing;")
CANDIDATES = {
    "faster": cases.FASTER,
    "wrong": cases.WRONG,
    "writes half": cases.WRITES_HALF,
    "replays its first result": cases.CACHES_FIRST_RESULT,
    "lower precision": cases.LOWER_PRECISION,
    "changed signature": cases.CHANGED_SIGNATURE,
    "illegal address": cases.ILLEGAL_ADDRESS,
    "does not compile": BROKEN,
    "the baseline itself": cases.BASELINE,
}


def _judge(monkeypatch, setting: str) -> dict[str, profiler.Verdict]:
    monkeypatch.setenv(pool.POOL_ENV, setting)
    verdicts = profiler.judge(cases.BASELINE, list(CANDIDATES.values()), PATH, time_limit=60.0)
    for name, v in zip(CANDIDATES, verdicts):
        print(f"[pool {setting}] {name}: {v.status}: {v.message}")
    return dict(zip(CANDIDATES, verdicts))


MEASURED = ("faster", "not_faster")


def _key_facts(v: profiler.Verdict) -> tuple:
    """What decides a verdict, less what a timing measures (a measured verdict's message
    starts with its numbers; whether the baseline itself comes out faster is noise)."""
    if v.status in MEASURED:
        return "measured", v.correct, v.compiled, v.inputs_checked
    return v.status, v.correct, v.compiled, v.message.split(":")[0], [(d.line, d.severity) for d in v.diagnostics]


def test_verdicts_are_the_same_with_the_pool_off_and_on(monkeypatch):
    off = _judge(monkeypatch, "0")
    on = _judge(monkeypatch, "4")
    for name in CANDIDATES:
        assert _key_facts(on[name]) == _key_facts(off[name]), name
    assert on["faster"].status == off["faster"].status == "faster" and on["faster"].inputs_checked >= 4
    assert on["wrong"].status == "wrong" and "elements off by more than" in on["wrong"].message
    assert on["writes half"].status == "wrong" and "8388608 of 16777216 elements not written" in on["writes half"].message
    assert "input set 2" in on["replays its first result"].message
    assert "rtol=0.0001" in on["lower precision"].message
    assert on["illegal address"].status == "crash"
    assert on["does not compile"].status == "compile_error"
    assert on["the baseline itself"].status in MEASURED
    # Runs with the pool on came from spares that had warmed up; with it off, none did.
    ran_on = [v.extra["phases"] for v in on.values() if "phases" in v.extra and v.extra["phases"].get("harness")]
    assert ran_on and all(p["started_s_before"] > 0 for p in ran_on)
    assert all(any(name == "warm-up" for name, _ in p["harness"]) for p in ran_on)
    ran_off = [v.extra["phases"] for v in off.values() if "phases" in v.extra and v.extra["phases"].get("harness")]
    assert ran_off and not any(any(name == "warm-up" for name, _ in p["harness"]) for p in ran_off)
    # With the pool on, later candidates were built while an earlier one had the GPU, and
    # waited for their turn (a wait of the judge's own clock); with it off, none waited.
    assert any(p.get("turn_wait_s", 0) > 0 for p in ran_on)
    assert not any(p.get("turn_wait_s", 0) > 0.2 for p in ran_off)


def test_a_hang_in_a_pooled_process_times_out_and_the_next_is_judged(monkeypatch):
    monkeypatch.setenv(pool.POOL_ENV, "2")
    hang, good = profiler.judge(cases.BASELINE, [cases.INFINITE_LOOP, cases.FASTER], PATH, time_limit=10.0)
    print(hang.status, hang.message, good.status, good.message)
    print(hang.extra.get("stderr_tail", "")[-3000:])
    assert hang.status == "timeout"
    assert good.status == "faster" and good.correct is True
    # The good candidate was built beside the hang and waited for its turn until the hang was
    # killed: a wait that counted against neither of its own limits.
    assert good.extra["phases"]["turn_wait_s"] > 5.0
