"""Ranking of sampled FIM fills: in the selection's shape and scope first (engine.scope,
engine.local.rank_in_scope), and LocalEngine drawing extra candidates to rank."""

from __future__ import annotations

from pathlib import Path

from engine.local import FIM_OVERSAMPLE, LocalEngine, rank_in_scope
from engine.scope import balanced, fits_span, scope_of, unknown_names
from engine.types import Candidate

SAXPY = (Path(__file__).resolve().parents[2] / "examples" / "saxpy.cu").read_text()
STATEMENT = "y[i] = a * x[i] + y[i];"
AT = SAXPY.index(STATEMENT)
PREFIX, SUFFIX = SAXPY[:AT], SAXPY[AT + len(STATEMENT):]


def test_invented_names_are_unknown_and_declared_or_builtin_ones_are_not():
    scope = scope_of(PREFIX, SUFFIX)
    assert unknown_names("y[i] = a * x[i] + b * y[i];", scope) == ["b"]
    assert unknown_names(STATEMENT, scope) == []
    assert unknown_names("float t = fmaxf(x[i], 1.0f) * 0x1F; y[i] = t;", scope) == []
    assert unknown_names("y[i] = __ldg(&x[i]) + s.val;", scope) == ["s"]   # members are not checked
    assert unknown_names('// beta here\ny[i] = a; printf("gamma");', scope) == []


def test_shape_of_a_one_line_selection():
    assert fits_span(STATEMENT, PREFIX, SUFFIX)
    assert not fits_span("y[i] = a * x[i] + y[i];\n    }\n}", PREFIX, SUFFIX)   # ran past the span
    assert not fits_span("if (i < n) {", PREFIX, SUFFIX)                      # unbalanced
    assert fits_span("a();\n    b();\n", "{\n", "}\n")   # a block body may have several lines
    assert balanced("f(a[i], \")\")") and not balanced("} else {")


def _candidate(text: str) -> Candidate:
    return Candidate(text, 1, 1, 0.0, "eos", text)


def test_rank_puts_distinct_in_shape_and_in_scope_candidates_first():
    texts = ["y[i] = a * x[i] + b * y[i];", "y[i] = a * x[i] + y[i];\n    }", "y[i] = a * x[i] + b * y[i];",
             "y[i] = x[i];", "y[i] = a * x[i] + y[i];"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], PREFIX, SUFFIX)]
    assert ranked == ["y[i] = x[i];", "y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + b * y[i];",
                      "y[i] = a * x[i] + y[i];\n    }", "y[i] = a * x[i] + b * y[i];"]


def test_sampled_fim_fill_draws_extra_candidates_and_returns_n(tiny_fim_checkpoint):
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    seen = []
    original = model.decode_batch

    def decode_batch(request, *args):
        seen.append(request.n)
        return original(request, *args)

    model.decode_batch = decode_batch
    out = model.infill(PREFIX, SUFFIX, n=3, max_tokens=8, temperature=0.7, seed=0)
    assert len(out) == 3 and seen == [3 * FIM_OVERSAMPLE]
    greedy = model.infill(PREFIX, SUFFIX, n=2, max_tokens=8, temperature=0.0)
    assert len(greedy) == 2 and seen[-1] == 2   # greedy candidates are all alike: nothing to rank
