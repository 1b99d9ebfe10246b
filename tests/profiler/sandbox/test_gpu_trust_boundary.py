"""Attacks on the judge that need a candidate timed on a GPU: patched timers and
comparisons, a poisoned build between two real load_inline builds, a process left behind
while the GPU run goes on. None may yield a correct or faster verdict, or a survivor.
Needs ninja for load_inline (`pip install ninja`).
"""

from __future__ import annotations

import importlib.util
import shutil
import uuid
from pathlib import Path

import pytest

import profiler

_spec = importlib.util.spec_from_file_location("kernelbench_cases",
                                               Path(__file__).parent.parent / "kernelbench_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)
_spec = importlib.util.spec_from_file_location("sandbox_cases", Path(__file__).parent.parent / "sandbox_cases.py")
sandbox_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sandbox_cases)

pytestmark = pytest.mark.gpu

# Right, but not faster: the cheats below must not make it look faster, or make a wrong
# forward look right.
WRONG_NEW = """

class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""

# Event times of the candidate's runs divided by 50: the start/end events recorded around
# a ModelNew call are told apart by what ran last.
PATCHED_EVENTS = """
_ran = {"new": False}
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record

def _tagging_record(self, *args, **kwargs):
    self._new = _ran["new"]
    _ran["new"] = False
    return _record(self, *args, **kwargs)

def _fast_elapsed(self, end):
    ms = _elapsed(self, end)
    return ms / 50 if getattr(end, "_new", False) else ms

torch.cuda.Event.record = _tagging_record
torch.cuda.Event.elapsed_time = _fast_elapsed


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.clamp_min(x, 0.0)
        _ran["new"] = True
        return out
"""

PATCHED_PERF_COUNTER = """
import time as _time
_time.perf_counter = lambda: 0.0
""" + cases.HONEST_NEW

PATCHED_ALLCLOSE = """
torch.allclose = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
""" + WRONG_NEW

# Model runs in the same process: the baseline's relu, patched, answers like the wrong ModelNew.
PATCHED_LIBRARY = """
torch.relu = lambda x: x
""" + WRONG_NEW

PATCHED_PROFILER_COMPARE = """
import sys as _sys
_sys.modules["profiler.measure.verify"].compare = lambda *args, **kwargs: None
_sys.modules["profiler.run.kernelbench"].compare = lambda *args, **kwargs: None
""" + WRONG_NEW


@pytest.fixture(scope="module", autouse=True)
def ninja_present():
    if shutil.which("ninja") is None:
        pytest.fail("load_inline needs ninja on PATH: pip install ninja (with --target DIR, add DIR/bin to PATH)")


def judge(candidates: list[str], problem: str = cases.RELU_PROBLEM) -> list[profiler.Verdict]:
    verdicts = profiler.judge(problem, candidates, "relu.py", time_limit=120.0)
    for v in verdicts:
        print(v.status, v.message, v.extra.get("flags"))
    return verdicts


def assert_nothing_proven(v: profiler.Verdict) -> None:
    assert v.status not in ("faster", "correct_untimed"), v.message
    assert v.correct is not True, v.message


@pytest.mark.parametrize("cheat, flag", [(PATCHED_EVENTS, "timer_patch"), (PATCHED_PERF_COUNTER, "timer_patch"),
                                         (PATCHED_ALLCLOSE, "comparison_patch"),
                                         (PATCHED_PROFILER_COMPARE, "comparison_patch"),
                                         (PATCHED_LIBRARY, "library_patch")])
def test_patched_timers_and_comparisons_prove_nothing(cheat, flag):
    (v,) = judge([cases.RELU_PROBLEM + cheat])
    assert_nothing_proven(v)
    assert flag in v.extra["flags"]


# The library patch of PATCHED_LIBRARY, written so that no pattern of the static check sees it.
HIDDEN_LIBRARY_PATCH = """
torch.__setattr__("re" + "lu", lambda x: x)
""" + WRONG_NEW


def test_a_hidden_patch_of_model_is_caught_by_model_run_apart():
    (v,) = judge([cases.RELU_PROBLEM + HIDDEN_LIBRARY_PATCH])
    assert not v.extra.get("flags") or v.extra["flags"] == ["baseline_changed"]  # no pattern saw it
    assert v.status == "wrong" and "against Model run in a process of its own" in v.message, v.message
    (honest,) = judge([cases.RELU_PROBLEM + cases.HONEST_NEW])
    assert honest.correct is True and honest.extra["checked_apart"] == 5, honest.message  # 4 sets + the timed inputs


@pytest.mark.usefixtures("unconfined")  # in namespaces the poisoning write itself fails (read-only)
def test_a_poisoned_build_is_not_loaded_by_the_next_run(kernelbench_dir):
    problem = (kernelbench_dir / "level1" / "12_Matmul_with_diagonal_matrices_.py").read_text()
    name = f"diag_poison_{uuid.uuid4().hex[:8]}"
    honest = cases.diag_mul_candidate(problem, cases.DIAG_RIGHT_ROW, name)
    # Overwrites every library of that extension it can reach with garbage.
    poisoner = problem + f"""
import os as _os, pathlib as _pathlib
_ext = _pathlib.Path(_os.environ["TORCH_EXTENSIONS_DIR"])
for _so in _ext.parent.glob("*/{name}/*.so"):
    _so.write_bytes(b"not a library")
""" + cases.HONEST_NEW.replace("torch.clamp_min(x, 0.0)", "torch.diag(A) @ B").replace("(self, x)", "(self, A, B)")
    first, poisoning, again = profiler.judge(problem, [honest, poisoner, honest], "problem.py", time_limit=300.0)
    for v in (first, poisoning, again):
        print(v.status, v.message, v.extra.get("flags"), v.extra.get("builds"))
    assert first.correct is True and again.correct is True, again.message
    assert "file_write" in poisoning.extra["flags"]
    assert again.extra["builds"][0]["cached"] is False  # the tampered folder was emptied and built again


@pytest.mark.usefixtures("unconfined")
def test_a_process_left_behind_dies_with_the_sandbox_while_the_gpu_is_used(tmp_path):
    pid_file = tmp_path / "escaped.pid"
    escape = cases.RELU_PROBLEM + f"""
import os as _os, time as _time
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        open({str(pid_file)!r}, "w").write(str(_os.getpid()))
        _time.sleep(600)
    _os._exit(0)
while not _os.path.exists({str(pid_file)!r}):
    _time.sleep(0.01)
""" + cases.HONEST_NEW
    (v,) = judge([escape])
    assert v.correct is True and "threads" in v.extra["flags"]
    sandbox_cases.assert_dies(int(pid_file.read_text()))
