"""A KernelBench candidate judged again in the same process (the language server's case):
its load_inline build is found in its verified folder, not built again, and the verdict is
the same. profile()'s torch.compile run finds the build the judging run left (one build per
document), and a second profile() of the document reuses that torch.compile measurement. Needs ninja for load_inline.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

import profiler
from dice_lsp.bench.tasks import splice_model_new

pytestmark = pytest.mark.gpu

CONTROLS = Path(__file__).resolve().parents[3] / "benchmarks" / "kernelbench_controls"


@pytest.fixture(scope="module", autouse=True)
def ninja_present():
    if shutil.which("ninja") is None:
        pytest.fail("load_inline needs ninja on PATH: pip install ninja (with --target DIR, add DIR/bin to PATH)")


def _fresh(builds: list[dict]) -> int:
    return sum(not b["cached"] for b in builds)


def test_a_warm_rejudge_finds_the_build_and_gives_the_same_verdict(kernelbench_dir):
    # Sigmoid's control is about 0.7x eager: "not_faster" with room, so noise cannot flip it.
    problem = (kernelbench_dir / "level1" / "21_Sigmoid.py").read_text()
    document = splice_model_new(problem, (CONTROLS / "level1" / "21_Sigmoid.correct.py").read_text())
    document += f"\n# {uuid.uuid4().hex}: a text no earlier test built\n"

    profiled = [profiler.profile(document, "21_Sigmoid.py", time_limit=300.0) for _ in range(2)]
    judged = [profiler.judge(problem, [document], "21_Sigmoid.py", time_limit=300.0)[0] for _ in range(2)]
    for v in profiled + judged:
        print(v.status, v.speedup, v.message, v.extra.get("builds"), v.extra.get("torch_compile_builds"))

    first, again = profiled
    assert first.correct is True and again.correct is True, again.message
    assert first.status == again.status and first.compiled and again.compiled
    assert _fresh(first.extra["builds"]) == 1  # built once, by the judging run
    assert "compile_ms" in first.extra, first.extra.get("torch_compile")
    assert first.extra["torch_compile_builds"][0]["cached"] is True  # torch.compile's run found it
    assert _fresh(first.extra["torch_compile_builds"]) == 0
    assert _fresh(again.extra["builds"]) == 0 and again.extra["builds"][0]["cached"] is True
    # The second profile reuses the first's torch.compile(Model) measurement (CompiledBaselines):
    # no torch.compile run, so no builds of one.
    assert "torch_compile_age_s" not in first.extra and again.extra["torch_compile_age_s"] > 0
    assert "torch_compile_builds" not in again.extra
    assert again.extra["compile_ms"] == first.extra["compile_ms"]
    for v in judged:  # judge() of the same document: its build is there already
        assert v.correct is True and v.status == first.status, v.message
        assert _fresh(v.extra["builds"]) == 0
    assert again.speedup == pytest.approx(first.speedup, rel=0.25)  # the same kernel, timed again
    if again.extra.get("isolation") == "namespaces":
        # The second profile ran in the sandbox kept for the document after the first
        # (profiler.sandbox.spare): started before its request, not at it.
        assert again.extra["phases"]["started_s_before"] > 0.5
        assert first.extra["phases"]["started_s_before"] < 0.5
