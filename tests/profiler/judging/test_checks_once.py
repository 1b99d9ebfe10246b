"""python_check and static_flags run once per candidate document, however many steps of the
KernelBench schedule ask (builds ahead, Model alone, pre-started sandboxes, the verdict): a
real judging run on this machine, with counting wrappers around the two checks."""

from __future__ import annotations

from collections import Counter

import pytest

import profiler
from profiler.judging import kernelbench
from profiler.judging.schedule import KernelBenchSchedule

pytestmark = pytest.mark.timeout(300)

PROBLEM = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
'''


def answer(body: str) -> str:
    return PROBLEM + f"\n\nclass ModelNew(Model):\n    def forward(self, x):\n        return {body}\n"


FIRST, SECOND = answer("x * 2.0"), answer("x + x")
BROKEN = PROBLEM + "\n\nclass ModelNew(:\n"
CANDIDATES = [FIRST, SECOND, BROKEN, FIRST]  # the same text twice is one document


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter, Counter]:
    """Counts of python_check (by document) and static_flags (by candidate) as the judge
    calls them; each call goes on to the real check."""
    parsed, flagged = Counter(), Counter()
    python_check, static_flags = kernelbench.python_check, kernelbench.static_flags

    def counting_python_check(source: str, path: str):
        parsed[source] += 1
        return python_check(source, path)

    def counting_static_flags(candidate: str, baseline: str = ""):
        flagged[candidate] += 1
        return static_flags(candidate, baseline)

    monkeypatch.setattr(kernelbench, "python_check", counting_python_check)
    monkeypatch.setattr(kernelbench, "static_flags", counting_static_flags)
    return parsed, flagged


def assert_once_each(parsed: Counter, flagged: Counter) -> None:
    assert parsed[FIRST] == parsed[SECOND] == parsed[BROKEN] == 1
    assert parsed[PROBLEM] <= 1
    assert flagged == Counter({FIRST: 1, SECOND: 1})  # a candidate that does not parse is not flagged


def test_the_editors_judge_checks_each_candidate_once(counted) -> None:
    verdicts = profiler.judge(PROBLEM, CANDIDATES, "problem.py", time_limit=60.0)
    assert [v.status for v in verdicts][2] == "compile_error"
    assert_once_each(*counted)


def test_the_bench_schedule_checks_each_candidate_once(counted) -> None:
    """The schedule as `dice bench` runs it: builds overlapping the GPU steps, torch.compile
    of the best."""
    schedule = KernelBenchSchedule(overlap=True, compile_best=True, build_workers=2)
    try:
        schedule.add("problem", PROBLEM, "problem.py", 60.0, CANDIDATES)
        judged = schedule.judge("problem")
    finally:
        schedule.close()
    assert len(judged.verdicts) == len(CANDIDATES) and judged.verdicts[2].status == "compile_error"
    assert_once_each(*counted)
