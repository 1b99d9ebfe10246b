"""dice_lsp.bench.fills (benchmarks/fill_judge.py runs it): a held-out case becomes a document the product's judge takes
(a generated spec that parses, a kernel that compiles), and the judge's verdicts come back
per candidate. On a GPU the original judged against itself is correct and a wrong fill is
wrong; on the CPU the judge compiles and says it could not run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dice_lsp.bench.fills import document, has_outputs, judge_case, spec_lines, summary
from profiler.source.spec import parse_spec

REPO = Path(__file__).resolve().parents[3]

CASE = {  # the shape of a builtin_eval record's case (prefix without the prelude)
    "kernel": "scale",
    "prefix": "__global__ void scale(float *out, const float *in, int n, float s)\n{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n)\n    ",
    "middle": "out[i] = s * in[i];",
    "suffix": "\n}\n",
}


def test_the_generated_spec_covers_every_parameter_and_parses():
    at, lines = spec_lines("#include <math.h>\n" + CASE["prefix"] + CASE["middle"] + CASE["suffix"], "scale")
    assert at == 1
    assert "let n = 256" in lines and "let s = 1.5" in lines
    assert "buffer out[1 << 20], in[1 << 20]" in lines and "inout out\n" in lines
    spec = parse_spec(document(CASE, CASE["middle"]))["scale"]
    assert spec.inout == frozenset({"out"})


def test_no_two_scalar_parameters_get_the_same_value():
    """With one value for every integer, `float c = 0;` for `float c = floorf((budget - base) / per);`
    computed the same outputs and was judged correct."""
    source = ("__global__ void k(float *out, int budget, int base, float per, float scale, int n)\n"
              "{\n  out[0] = floorf((budget - base) / per) * scale + n;\n}\n")
    _, lines = spec_lines(source, "k")
    assert "let budget = 256\n" in lines and "let base = 264\n" in lines and "let n = 272\n" in lines
    assert "let per = 1.5\n" in lines and "let scale = 1.75\n" in lines
    values = [line.split(" = ")[1] for line in lines.splitlines() if line.startswith("// dice: let ")]
    assert len(values) == len(set(values)) == 5


def test_a_kernel_written_for_one_block_is_launched_as_one():
    """256 blocks of `a[idx] *= 2` with idx from threadIdx alone race on the same elements: the
    original was "correct" against itself by luck, and so was a fill. A kernel that never reads
    blockIdx or gridDim gets one block; one that does, 256."""
    one = "__global__ void doublify(float *a)\n{\n  int idx = threadIdx.x + threadIdx.y*4;\n  a[idx] *= 2;\n}\n"
    _, lines = spec_lines(one, "doublify")
    assert "// dice: launch grid=1, block=256\n" in lines
    _, lines = spec_lines("#include <math.h>\n" + CASE["prefix"] + CASE["middle"] + CASE["suffix"], "scale")
    assert "// dice: launch grid=256, block=256\n" in lines
    assert tuple(parse_spec(document(CASE, CASE["middle"]))["scale"].grid)[:1] == (256,)
    doc = {"kernel": "doublify", "prefix": one[:one.index("a[idx]")], "middle": "a[idx] *= 2;",
           "suffix": one[one.index("a[idx]") + len("a[idx] *= 2;"):]}
    assert tuple(parse_spec(document(doc, doc["middle"]))["doublify"].grid)[:1] == (1,)


def test_every_case_of_the_shipped_records_gets_a_spec_that_parses():
    for record in sorted((REPO / "docs").glob("builtin-eval-*.json")):
        cases = json.loads(record.read_text()).get("cases", [])
        for case in cases:
            assert case["kernel"] in parse_spec(document(case, case["middle"])), (record.name, case["kernel"])


def test_the_judge_gives_each_distinct_candidate_a_verdict():
    from profiler.checks.compile import find_nvcc

    if find_nvcc() is None:
        pytest.skip("no nvcc")
    from profiler.machine.gpu import gpu_name

    verdicts = judge_case(CASE, ["out[i] = s * in[i];", "out[i] = s + in[i];", "out[i] = t * in[i];"], 20)
    assert set(verdicts) == {"out[i] = s * in[i];", "out[i] = s + in[i];", "out[i] = t * in[i];"}
    assert verdicts["out[i] = t * in[i];"]["compiled"] is False
    assert verdicts[CASE["middle"]]["compiled"] is True
    if gpu_name() is None:
        assert verdicts[CASE["middle"]]["correct"] is None  # compiled, not run
    else:
        assert verdicts[CASE["middle"]]["correct"] is True
        assert verdicts["out[i] = s + in[i];"]["correct"] is False


def test_the_summary_counts_only_cases_whose_original_is_judged_correct():
    right = {"correct": True, "correct_not_exact": True}
    report = {"sets": {"x": {"cases": [
        {"original": {"correct": True}, "methods": {"model": right}},
        {"original": {"correct": False}, "methods": {"model": right}},
        {"original": {"correct": True}, "outputs": False, "methods": {"model": right}},
        {"error": "no kernel"},
    ]}}}
    assert summary(report, ["model"]) == {"x": {"cases": 4, "judgeable": 1, "model": {"correct": 1, "correct_not_exact": 1}}}


def test_a_kernel_that_only_prints_has_no_outputs_to_judge():
    printing = {"kernel": "hi", "prefix": "__global__ void hi(const float *x)\n{\n  ",
                "middle": 'printf("%f\\n", x[0]);', "suffix": "\n}\n"}
    assert not has_outputs(printing)
    assert has_outputs(CASE)


def test_resume_keeps_the_cases_an_earlier_run_judged(tmp_path):
    """--resume: a run the device's time limit cut goes on; the cases it judged are taken from its
    report as they are (here every case, so nothing is judged again and no GPU is needed)."""
    record = tmp_path / "builtin-eval-x.json"
    fills = [{"method": "model", "case": 0, "texts": [CASE["middle"]]}]
    record.write_text(json.dumps({"cases": [CASE], "fills": fills}))
    judged = {"case": 0, "kernel": "scale", "outputs": True, "original": {"correct": True},
              "methods": {"model": {"correct": True, "correct_not_exact": False, "candidates": []}}}
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"sets": {"x": {"cases": [judged]}}}))
    out = subprocess.run([sys.executable, "benchmarks/fill_judge.py", str(record), "--methods", "model",
                          "--resume", str(earlier)], capture_output=True, text=True, timeout=120, cwd=REPO,
                         check=False, env={**os.environ, "OUT": str(tmp_path / "out")})
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "fill_judge.json").read_text())
    assert report["sets"]["x"]["cases"] == [judged]
    assert report["summary"]["x"] == {"cases": 1, "judgeable": 1, "model": {"correct": 1, "correct_not_exact": 0}}
