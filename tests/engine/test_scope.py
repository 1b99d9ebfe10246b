"""Ranking of sampled FIM fills: in the selection's shape and scope first (engine.scope,
engine.local.rank_in_scope), and LocalEngine drawing extra candidates to rank."""

from __future__ import annotations

from pathlib import Path

from engine.local import FIM_OVERSAMPLE, LocalEngine, rank_in_scope
from engine.scope import balanced, cut_to_span, fits_span, scope_of, unknown_names
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
    # The selection runs to the end of its line: a fill that stops mid-statement is not a line.
    assert not fits_span("float s =", PREFIX, SUFFIX) and not fits_span("float", PREFIX, SUFFIX)
    assert fits_span("y[i] = 0.0f;  // reset", PREFIX, SUFFIX) and fits_span("if (i < n)", PREFIX, SUFFIX)
    assert fits_span("// nothing to do", PREFIX, SUFFIX) and fits_span("#pragma unroll", PREFIX, SUFFIX)


def _candidate(text: str) -> Candidate:
    return Candidate(text, 1, 1, 0.0, "eos", text)


def test_rank_puts_distinct_in_shape_and_in_scope_candidates_first():
    texts = ["y[i] = a * x[i] + b * y[i];", "y[i] = a * x[i] + y[i];\n    }", "y[i] = a * x[i] + b * y[i];",
             "y[i] = x[i];", "y[i] = a * x[i] + y[i];"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], PREFIX, SUFFIX)]
    assert ranked == ["y[i] = x[i];", "y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + b * y[i];",
                      "y[i] = a * x[i] + y[i];\n    }", "y[i] = a * x[i] + b * y[i];"]


def test_rank_puts_the_answer_drawn_most_often_first_among_equals():
    texts = ["y[i] = x[i];", STATEMENT, "y[i] = 2.0f * x[i];", STATEMENT, STATEMENT, "y[i] = 2.0f * x[i];"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], PREFIX, SUFFIX)]
    assert ranked[:3] == [STATEMENT, "y[i] = 2.0f * x[i];", "y[i] = x[i];"]


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


def test_a_one_line_selection_gets_the_first_line_of_a_fill_that_runs_on():
    """The fill's first line is the statement; what follows repeats the suffix's code."""
    ran_on = "y[i] = a * x[i] + y[i];\n    }\n}\n\nint main() {"
    assert cut_to_span(ran_on, PREFIX, SUFFIX) == STATEMENT
    assert cut_to_span(STATEMENT, PREFIX, SUFFIX) == STATEMENT
    # A first line that is not whole is no candidate by itself: the fill stays as it was.
    assert cut_to_span("if (i < n) {\n y[i] = 0;\n}", PREFIX, SUFFIX) == "if (i < n) {\n y[i] = 0;\n}"
    # A selection of whole lines may be answered with several.
    assert cut_to_span("a();\n    b();\n", "{\n", "}\n") == "a();\n    b();\n"


def test_a_fill_that_repeats_the_code_after_the_selection_is_cut_before_it():
    """A block body answered with the body, then the suffix's `}` and more: cut at the `}`."""
    prefix, suffix = "__global__ void k(float* y, int n) {\n", "}\n\nint main() { return 0; }\n"
    body = "    int i = threadIdx.x;\n    if (i < n) {\n        y[i] = 0.0f;\n    }\n"
    assert cut_to_span(body + "}\n\n__global__ void other() {}\n", prefix, suffix) == body
    assert cut_to_span(body, prefix, suffix) == body
    # The selection ended at the end of a line (the suffix starts with its newline).
    assert cut_to_span(body.rstrip("\n") + "\n}\nint x;", prefix, "\n}\n") == body.rstrip("\n")
    # An inner `}` whose fill is not balanced up to it is not the end.
    inner = "    if (i < n) {\n        y[i] = 0.0f;\n    }\n"
    assert cut_to_span(inner, prefix, "    }\n}\n") == inner
