"""profile()'s torch.compile(Model) baseline is measured once per document and reused by the
process (the warm re-profile the language server makes), and only while it is fresh."""

from __future__ import annotations

import threading
import time

from profiler.judging.caches import CompiledBaselines, TorchCompileBaseline
from profiler.judging.kernelbench import with_torch_compile
from profiler.sandbox.builds import REUSE_ENV
from profiler.verdict.types import Verdict


class Measures:
    """Stands for torch_compile_baseline's sandboxed run: answers in turn, counting calls."""

    def __init__(self, *answers: TorchCompileBaseline) -> None:
        self.answers, self.calls = list(answers), 0

    def __call__(self) -> TorchCompileBaseline:
        self.calls += 1
        return self.answers.pop(0)


TIMED = TorchCompileBaseline(compile_ms=0.5, eager_ms=1.0)
FAILED = TorchCompileBaseline(compile_ms=None, eager_ms=None, why="torch.compile failed")


def test_the_same_document_is_measured_once_and_reused_with_its_age():
    kept, measure = CompiledBaselines(), Measures(TIMED)
    first = kept.get("doc", measure)
    again = kept.get("doc", measure)
    assert measure.calls == 1
    assert first.age_s == 0 and again.age_s > 0
    assert (again.compile_ms, again.eager_ms) == (TIMED.compile_ms, TIMED.eager_ms)


def test_another_document_is_measured_on_its_own():
    kept, measure = CompiledBaselines(), Measures(TIMED, TorchCompileBaseline(0.7, 1.4))
    kept.get("doc", measure)
    other = kept.get("doc, edited", measure)
    assert measure.calls == 2 and other.compile_ms == 0.7 and other.age_s == 0


def test_a_failed_measurement_is_not_kept():
    kept, measure = CompiledBaselines(), Measures(FAILED, TIMED)
    assert kept.get("doc", measure).compile_ms is None
    assert kept.get("doc", measure).compile_ms == TIMED.compile_ms
    assert measure.calls == 2


def test_a_stale_measurement_is_made_again():
    kept, measure = CompiledBaselines(), Measures(TIMED, TorchCompileBaseline(0.6, 1.1))
    kept.TTL_S = 0.0
    kept.get("doc", measure)
    assert kept.get("doc", measure).compile_ms == 0.6 and measure.calls == 2


def test_only_the_most_recent_documents_are_kept():
    kept = CompiledBaselines()
    kept.MAX = 2
    measure = Measures(*[TIMED] * 4)
    for document in ("a", "b", "c"):
        kept.get(document, measure)
    kept.get("c", measure)  # kept
    assert measure.calls == 3
    kept.get("a", measure)  # dropped as the least recently used
    assert measure.calls == 4


def test_nothing_is_kept_when_reuse_is_off(monkeypatch):
    monkeypatch.setenv(REUSE_ENV, "0")
    kept, measure = CompiledBaselines(), Measures(TIMED, TIMED)
    kept.get("doc", measure)
    assert kept.get("doc", measure).age_s == 0 and measure.calls == 2


def test_a_verdict_says_how_old_a_reused_baseline_is():
    verdict = Verdict.failed("not_faster", "1.0000 ms")
    verdict.time_ms = 0.25
    with_torch_compile(verdict, TorchCompileBaseline(0.5, 1.0, age_s=42.0))
    assert verdict.extra["speedup_vs_compile"] == 2.0
    assert verdict.extra["torch_compile_age_s"] == 42.0 and "42 s ago" in verdict.message
    fresh = Verdict.failed("not_faster", "1.0000 ms")
    fresh.time_ms = 0.25
    with_torch_compile(fresh, TIMED)
    assert "torch_compile_age_s" not in fresh.extra and "ago" not in fresh.message


def test_two_requests_for_the_same_document_at_once_measure_it_once():
    kept = CompiledBaselines()
    calls = []

    def measure() -> TorchCompileBaseline:
        calls.append(1)
        time.sleep(0.3)  # the first request's torch.compile run, while the second arrives
        return TIMED

    got = []
    threads = [threading.Thread(target=lambda: got.append(kept.get("doc", measure))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(calls) == 1 and len(got) == 2
    assert sorted(g.age_s > 0 for g in got) == [False, True]  # one measured, one reused
