"""Ranking of sampled FIM fills: in the selection's shape and scope first (engine.fill.names,
spans, declarations, usage; engine.fill.ranking.rank_in_scope), and the fill policy
(engine.fill.repair) drawing extra candidates to rank through a LocalEngine."""

from __future__ import annotations

from pathlib import Path

from engine.decoding.local import LocalEngine
from engine.fill.declarations import declaration_types, declared_names, redeclared, without_type
from engine.fill.names import (file_names, first_invented, needed_names, renamed_declaration, scope_of,
                               unknown_names)
from engine.fill.ranking import normalized, rank_in_scope
from engine.fill.repair import (DECLARE_OVERSAMPLE, FIM_OVERSAMPLE, ONE_LINE_MAX_TOKENS, REPAIR_ROWS, TOP_UP_SEED,
                                USED_AS_SHARE, scope_repairs)
from engine.fill.source import balanced
from engine.fill.spans import closes_in_context, cut_to_span, fits_span, inside_one_line, must_close, span_ended, \
    starts_statement
from engine.fill.usage import initialized_declaration, type_family, uninitialized_declaration, usage_type
from engine.types import Candidate

SAXPY = (Path(__file__).resolve().parents[3] / "examples" / "saxpy.cu").read_text()
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


def test_the_first_invented_name_and_the_text_before_it():
    scope = scope_of(PREFIX, SUFFIX)
    assert first_invented("y[i] = a * x[i] + b * y[i];", scope) == ("y[i] = a * x[i] + ", "b")
    assert first_invented("y[i] = a*x[i]+b*y[i];", scope) == ("y[i] = a*x[i]+", "b")
    assert first_invented("q = a;", scope) == ("", "q")
    assert first_invented(STATEMENT, scope) is None
    assert first_invented("y[i] = a;\n    q = 1;", scope) is None   # after a line break: no place to restart
    assert {"saxpy", "n", "a", "x", "y", "i"} <= file_names(PREFIX, SUFFIX)
    assert not {"float", "threadIdx", "blockIdx"} & file_names(PREFIX, SUFFIX)


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


IF_LINE = "if (i < n) {"
IF_AT = SAXPY.index(IF_LINE)
IF_PREFIX, IF_SUFFIX = SAXPY[:IF_AT], SAXPY[IF_AT + len(IF_LINE):]


def test_a_selected_line_that_opens_a_block_is_filled_by_one_that_does():
    """29% of real code lines (`if (...) {`, `for (...) {`, `}`, `} else {`) are not
    balanced on their own; their fill is in shape when the file with it closes every bracket in
    order, as it did with the selection."""
    assert closes_in_context(IF_LINE, IF_PREFIX, IF_SUFFIX) and fits_span(IF_LINE, IF_PREFIX, IF_SUFFIX)
    assert fits_span("if (i >= n) return; {", IF_PREFIX, IF_SUFFIX)
    assert fits_span("for (; i < n; i += blockDim.x * gridDim.x) {", IF_PREFIX, IF_SUFFIX)
    # An unbalanced fill that leaves the file with a bracket too many, or closing in the wrong order.
    for fill in ("if (i < n) { {", "if (i < n) ({", "if (i < n) {\n  y[i] = 0;", "if (i < n) ]"):
        assert not fits_span(fill, IF_PREFIX, IF_SUFFIX), fill
    # A balanced one stays in shape (a file mid-edit may lack its last `}`: then the brackets
    # around the selection differ too, and its balanced fills are right); the compiler judges it.
    assert fits_span("if (i < n)", IF_PREFIX, IF_SUFFIX) and fits_span("y[i] = 0;", IF_PREFIX, IF_SUFFIX)
    # The fill runs on past the line: its first line is the fill, and its decoding may stop.
    assert cut_to_span("if (i < n) {\n        y[i] = 0;\n    }\n}", IF_PREFIX, IF_SUFFIX) == IF_LINE
    assert span_ended("if (i < n) {\n  y", IF_PREFIX, IF_SUFFIX)
    # `} else {` and a lone `}`.
    code = "void f(int a) {\n  if (a) {\n    g();\n  } else {\n    h();\n  }\n}\n"
    for line in ("} else {", "}"):
        at = code.index(line)
        assert fits_span(line, code[:at], code[at + len(line):]), line
    # Only where the file lacks a closing bracket may a fill start with one (engine.decoding.local bans it
    # elsewhere: the small model closes the block at its last statement instead of filling it).
    assert must_close(code[:code.index("}\n}")], code[code.index("}\n}") + 1:])
    assert not must_close(IF_PREFIX, IF_SUFFIX) and not must_close(PREFIX, SUFFIX)
    # A file whose brackets do not close in order around the selection (doubled in `#if`
    # branches, or mid-edit) judges no fill by its context: only balanced fills are in shape.
    broken = "void f(int a) {\n#if A\n  if (a) {\n#else\n  if (!a) {\n#endif\n    g();\n  }\n  "
    assert not closes_in_context("if (a) {", broken, "\n    h();\n  }\n}\n")
    assert closes_in_context("h();", broken, "\n}\n")


def test_a_line_that_a_deeper_line_or_a_macro_goes_on_with():
    code = ("__global__ void k(float* y, int rows, int cols) {\n    const int n =\n        rows * cols;\n"
            "    y[0] = n;\n}\n")
    at = code.index("const int n =")
    prefix, suffix = code[:at], code[at + len("const int n ="):]
    assert fits_span("const int n =", prefix, suffix) and fits_span("const int count = rows +", prefix, suffix)
    # Where the next line is not deeper, a line that stops mid-statement is not a line.
    at = code.index("y[0] = n;")
    assert not fits_span("y[0] =", code[:at], code[at + len("y[0] = n;"):])
    macro = "#define APPLY(x) \\\n  do { \\\n    f(x); \\\n  } while (0)\n"
    at = macro.index("f(x); \\")
    prefix, suffix = macro[:at], macro[at + len("f(x); \\"):]
    assert fits_span("g(x); \\", prefix, suffix)
    assert not fits_span("g(x); \\", PREFIX, SUFFIX)    # not inside a macro


def test_a_line_of_cuda_inside_a_python_string_is_judged_by_that_source():
    """A load_inline extension's or a KernelBench ModelNew's CUDA lives in a triple-quoted
    string: the brackets around the selection are that string's, not the Python file's (whose
    quotes and comments the C reading of brackets would get wrong)."""
    code = (
        'import torch\nfrom torch.utils.cpp_extension import load_inline\n\n'
        '# scale (x) in place: "quoted" [sic\n'
        'source = r"""\n__global__ void scale(float* x, int n) {\n'
        '    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) {\n        x[i] *= 2.0f;\n    }\n}\n"""\n\n'
        'ext = load_inline(name="ext", cpp_sources="", cuda_sources=source, functions=["scale"])\n')
    at = code.index("if (i < n) {")
    prefix, suffix = code[:at], code[at + len("if (i < n) {"):]
    assert fits_span("if (i < n) {", prefix, suffix) and not fits_span("if (i < n) {{", prefix, suffix)
    assert cut_to_span("if (i < n) {\n        x[i] = 0;", prefix, suffix) == "if (i < n) {"
    at = code.index("}\n}")
    assert must_close(code[:at], code[at + 1:])


def test_a_line_of_an_argument_list_ends_with_a_comma():
    code = "__global__ void k(const float* x,\n                  float* y, int n) {\n  y[0] = x[0];\n}\n"
    line = "float* y, int n) {"
    at = code.index(line)
    assert fits_span(line, code[:at], code[at + len(line):])
    at = code.index("const float* x,")
    prefix, suffix = code[:at], code[at + len("const float* x,"):]
    assert fits_span("const float* __restrict__ x,", prefix, suffix)
    assert not fits_span("const float* x", prefix, suffix)     # not a line of the list
    assert not fits_span("x = 1,", PREFIX, SUFFIX)              # a statement is not inside a list


def _candidate(text: str) -> Candidate:
    return Candidate(text, 1, 1, 0.0, "eos", text)


def test_rank_puts_distinct_in_shape_and_in_scope_candidates_first():
    texts = ["y[i] = a * x[i] + b * y[i];", "y[i] = a * x[i] + y[i];\n    }", "y[i] = a * x[i] + b * y[i];",
             "y[i] = x[i];", "y[i] = a * x[i] + y[i];"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], PREFIX, SUFFIX)]
    assert ranked == ["y[i] = x[i];", "y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + b * y[i];",
                      "y[i] = a * x[i] + y[i];\n    }", "y[i] = a * x[i] + b * y[i];"]


def test_candidates_that_differ_only_in_whitespace_are_one():
    # `a*x[i]` and `a * x[i]` are one candidate, counted together, not two of the n slots.
    texts = ["y[i] = x[i];", "y[i] = a*x[i] + y[i];", STATEMENT, "y[i] = a * x[i]+y[i];", "y[i] = 2.0f * x[i];"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], PREFIX, SUFFIX)]
    assert ranked[:3] == ["y[i] = a*x[i] + y[i];", "y[i] = x[i];", "y[i] = 2.0f * x[i];"]
    # Tokens, not characters: `a+ +b` is not `a++b`.
    assert normalized("a+ +b;") != normalized("a++b;") and normalized("a +b;") == normalized("a+b ;")


def test_rank_puts_the_answer_drawn_most_often_first_among_equals():
    texts = ["y[i] = x[i];", STATEMENT, "y[i] = 2.0f * x[i];", STATEMENT, STATEMENT, "y[i] = 2.0f * x[i];"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], PREFIX, SUFFIX)]
    assert ranked[:3] == [STATEMENT, "y[i] = 2.0f * x[i];", "y[i] = x[i];"]


def test_sampled_fim_fill_draws_extra_candidates_and_returns_n(tiny_fim_checkpoint):
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    seen = []
    original = model.decode_batch

    banned = []

    def decode_batch(request, *args, **kwargs):
        if kwargs.get("start_constraint") is None:   # not a repair of an invented name (below)
            seen.append(request.n)
            banned.append(kwargs.get("first_banned"))
        return original(request, *args, **kwargs)

    model.decode_batch = decode_batch
    out = model.infill(PREFIX, SUFFIX, n=3, max_tokens=8, temperature=0.7, seed=0)
    # The tiny random model's draw has fewer than 3 candidates that can compile: one more draw.
    assert len(out) == 3 and seen in ([3 * FIM_OVERSAMPLE], [3 * FIM_OVERSAMPLE] * 2)
    greedy = model.infill(PREFIX, SUFFIX, n=2, max_tokens=8, temperature=0.0)
    assert len(greedy) == 2 and seen[-1] == 2   # greedy candidates are all alike: nothing to rank
    # Every FIM draw, sampled or greedy, bans a first token that closes a bracket.
    assert model.closing_tokens and all(b == model.closing_tokens for b in banned)
    assert all(c.text.strip()[:1] not in ("}", ")", "]") for c in out + greedy)


def test_a_one_line_selection_gets_the_first_line_of_a_fill_that_runs_on():
    """The fill's first line is the statement; what follows repeats the suffix's code."""
    ran_on = "y[i] = a * x[i] + y[i];\n    }\n}\n\nint main() {"
    assert cut_to_span(ran_on, PREFIX, SUFFIX) == STATEMENT
    assert cut_to_span(STATEMENT, PREFIX, SUFFIX) == STATEMENT
    # A row stopped at the end of its line (span_ended) brings the line break, which the
    # selection does not have: filled with it, the user's line would gain an empty one.
    assert cut_to_span(STATEMENT + "\n", PREFIX, SUFFIX) == STATEMENT
    assert cut_to_span(" " + STATEMENT + " \n", PREFIX, SUFFIX) == " " + STATEMENT
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


def test_an_ended_answer_gives_the_same_fill_however_it_goes_on():
    """engine.fill.spans.span_ended: once it says an answer is ended, what the model would write next
    cannot change the fill (trim_suffix_overlap, then cut_to_span; whitespace aside), so its
    decoding stops there. Checked for a selection inside one line (the saxpy statement) and one
    of whole lines (a block body), over continuations that repeat the suffix, run on, or stop."""
    from engine.decoding.prompts import trim_suffix_overlap

    body_prefix, body_suffix = "__global__ void k(float* y, int n) {\n", "}\n\nint main() { return 0; }\n"
    body = "    int i = threadIdx.x;\n    if (i < n) {\n        y[i] = 0.0f;\n    }\n"
    ended = [(PREFIX, SUFFIX, STATEMENT + "\n"), (PREFIX, SUFFIX, "  y[i] = 0;\n    }"),
             (PREFIX, SUFFIX, "float t = x[i]; // (\n"),
             (body_prefix, body_suffix, body + "}\n"), (body_prefix, body_suffix, body + "}\n\n__global")]
    goes_on = ["", "\n", "    }\n}\n", SUFFIX, SUFFIX[:7], "x = 1;\n  y[i] = 2;", "}\n\nint main() { return 0; }\n",
               "int main() {", "\n\n)"]

    def fill(answer, prefix, suffix):
        return normalized(cut_to_span(trim_suffix_overlap(answer, suffix), prefix, suffix))

    for prefix, suffix, answer in ended:
        assert span_ended(answer, prefix, suffix), answer
        assert {fill(answer + more, prefix, suffix) for more in goes_on} == {fill(answer, prefix, suffix)}, answer
        if inside_one_line(prefix, suffix):   # and the ended answer's own fill has no line break
            assert "\n" not in cut_to_span(trim_suffix_overlap(answer, suffix), prefix, suffix), answer
    # Not ended: no line whole yet, a blank or unbalanced first line (its fill is the whole
    # answer), a body not yet followed by the suffix's line, or one whose `}` line is not whole.
    for prefix, suffix, answer in [(PREFIX, SUFFIX, STATEMENT), (PREFIX, SUFFIX, "\n  y[i] = 0;\n"),
                                   (PREFIX, SUFFIX, "if (i < n) {\n  y[i] = 0;\n"),
                                   (body_prefix, body_suffix, body), (body_prefix, body_suffix, body + "}"),
                                   (body_prefix, "", body + "}\n")]:
        assert not span_ended(answer, prefix, suffix), answer


KERNEL_HEAD = "__global__ void invert(unsigned char *dest, const unsigned char *src, int n) {\n"
USES_COUNT = "\n    for (int k = 0; k < count; ++k) {\n        float t = src[k] * scale;\n        dest[k] = t;\n    }\n}\n"


def test_declared_names_of_statements_parameters_loops_and_macros():
    assert declared_names("unsigned int i = blockIdx.x, j, tile[4];") == {"i", "j", "tile"}
    assert declared_names(KERNEL_HEAD) == {"dest", "src", "n"}
    assert declared_names("for (int k = 0; k < n; ++k) {") == {"k"}
    assert declared_names("#define TILE 16\nextern __shared__ float smem[];\nconst float *__restrict__ p = q;") == \
        {"TILE", "smem", "p"}
    # Statements that are not declarations: a return, a product, a call.
    assert declared_names("return x;") == set() and declared_names("y = (a * b);") == set()
    assert declared_names("f(a, b); g(x, *y);") == set()


def test_names_the_code_after_the_selection_needs_and_nothing_declares():
    # `count` is read after the selection and declared nowhere: the selection must declare it;
    # `k` and `t` are declared after it, `scale` is mentioned before it, `src` is a parameter.
    prefix = KERNEL_HEAD + "    float scale = 2.0f;\n    "
    assert needed_names(prefix, USES_COUNT) == ["count"]
    # Calls, types, members, macros in capitals and built-ins are never needed.
    suffix = "\n    helper(n);\n    Vec v;\n    v.len = N_MAX + threadIdx.x;\n}\n"
    assert needed_names(KERNEL_HEAD + "    ", suffix) == []


def test_a_fill_that_declares_a_name_its_block_already_has_is_found():
    prefix = KERNEL_HEAD + "    int i = threadIdx.x;\n    if (i < n) {\n        int j = i;\n    }\n    "
    suffix = "\n    int last = i;\n}\n"
    assert redeclared("int i = 0;", prefix, suffix) == ["i"]          # same block, before
    assert redeclared("int n = 4;", prefix, suffix) == ["n"]          # a parameter of the function
    assert redeclared("int last = 1;", prefix, suffix) == ["last"]    # same block, after
    assert redeclared("int j = 0;", prefix, suffix) == []             # j was in a nested block
    assert redeclared("if (i) { int i = 1; }", prefix, suffix) == []  # a nested block may shadow
    loop = KERNEL_HEAD + "    for (int k = 0; k < n; ++k) {\n        "
    assert redeclared("int k = 1;", loop, "\n    }\n}\n") == ["k"]    # the for's own variable


def test_a_statement_start_and_the_types_to_declare_a_needed_name_with():
    assert starts_statement(KERNEL_HEAD + "    ") and starts_statement("    x = 1;\n    ")
    assert not starts_statement("    int y = ") and not starts_statement("    if (x)\n        ")
    prefix = KERNEL_HEAD + "    double w = 0;\n    "
    # The drawn fills' types, the commonest first; storage classes dropped.
    assert declaration_types(["const int a = 1;", "const int b;", "float c = 0;", "__shared__ int s[4];"],
                             prefix) == ["const int ", "float "]
    # Without any, the values declared before the selection (not the pointer parameters).
    assert declaration_types([], prefix, 3) == ["double ", "int "]


def test_rank_puts_a_candidate_that_declares_the_needed_name_first():
    prefix = KERNEL_HEAD + "    float scale = 2.0f;\n    "
    texts = ["if (count > n) return;", "int count = n / 2;", "int scale = n;", "int  count  =  n;", "int count = n;"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], prefix, USES_COUNT)]
    # Declaring `count`, the one drawn twice (whitespace aside) first; then those that leave
    # it undeclared or declare `scale` again; last the whitespace twin, a repeat.
    assert ranked == ["int  count  =  n;", "int count = n / 2;", "if (count > n) return;", "int scale = n;",
                      "int count = n;"]


def _stubbed(model, answers):
    """The model's decode_batch replaced: each call's request is kept and answered with the
    next list of texts (the model's own answers would be a random model's)."""
    seen = []

    def decode_batch(request, *args, **kwargs):
        seen.append(request)
        texts = answers[len(seen) - 1]
        return [Candidate(texts[k % len(texts)], 4, 4, 0.0, "eos", "") for k in range(request.n)]

    model.decode_batch = decode_batch
    return seen


def test_a_fill_that_must_declare_a_name_gets_candidates_started_with_its_declaration(tiny_fim_checkpoint):
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    prefix = KERNEL_HEAD + "    float scale = 2.0f;\n    "
    seen = _stubbed(model, [["if (count > n) return;", "int i = n;"], [" n / 2", " n +"], [" 4;"]])
    out = [c.text for c in model.infill(prefix, USES_COUNT, n=2, max_tokens=64, temperature=0.7, seed=0)]
    # The draw, then one batch per type: `int ` (`count` is compared with the int `k`; the drawn
    # type too) with USED_AS_SHARE of the rows, then `float ` (declared before).
    assert [r.prefix[len(prefix):] for r in seen] == ["", "int count =", "float count ="]
    assert [r.n for r in seen] == [2 * FIM_OVERSAMPLE, 3, 1]
    assert all(r.max_tokens == ONE_LINE_MAX_TOKENS for r in seen[:1]) and seen[1].max_tokens <= ONE_LINE_MAX_TOKENS
    # The drawn `int i = n;` (twice) renamed to declare `count`, and `int count = n / 2;` (twice);
    # `int count = n +` is no expression and gets no `;`, and `float count = 4;` is no int.
    assert out == ["int count = n;", "int count = n / 2;"]


def test_no_declaration_is_started_when_the_draw_declares_the_needed_name(tiny_fim_checkpoint):
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    prefix = KERNEL_HEAD + "    float scale = 2.0f;\n    "
    seen = _stubbed(model, [["int count = n;", "const int count = 2 * n;"]])
    out = [c.text for c in model.infill(prefix, USES_COUNT, n=2, max_tokens=64, temperature=0.7, seed=0)]
    assert len(seen) == 1 and set(out) == {"int count = n;", "const int count = 2 * n;"}


# The type a needed name is used as after the selection (engine.fill.usage.usage_type), and what the
# engine does with it: declarations started with it, candidates of another family ranked lower.

FLAG_KERNEL = "__global__ void mark(const int64_t *row, bool *out, int64_t n) {\n  const int64_t t = threadIdx.x;\n  "
FLAG_SUFFIX = ("\n  for (int64_t e = row[t]; e < row[t + 1]; e++) {\n    if (e > n) {\n      found = true;\n"
               "    }\n  }\n  out[t] = !found;\n}\n")


def test_a_needed_name_used_as_a_flag_index_or_value_gets_that_type():
    assert type_family("const int64_t ") == "int" and type_family("unsigned int ") == "int"
    assert type_family("double ") == "float" and type_family("bool ") == "bool" and type_family("float4 ") == "float4"
    # Set to `true` and negated: a bool.
    assert usage_type("found", FLAG_KERNEL, FLAG_SUFFIX) == "bool "
    # An index, in a file whose integer values are int64_t: that integer type.
    head = "__global__ void gather(const int64_t *ptr, float *out, int64_t numel) {\n  "
    assert usage_type("idx", head, "\n  out[idx] = ptr[idx];\n}\n") == "int64_t "
    assert usage_type("i", KERNEL_HEAD + "    ", "\n    dest[i] = src[i];\n}\n") == "int "
    # An argument of a float math function, a value added to a float, stored into a float array.
    softmax = "__global__ void sm(const float *x, float *y, int n) {\n    "
    assert usage_type("m", softmax, "\n    float p = expf(x[0] - m);\n    y[0] = p;\n}\n") == "float "
    assert usage_type("sum", softmax, "\n    float p = x[0];\n    sum += p;\n    y[0] = p / sum;\n}\n") == "float "
    assert usage_type("s", softmax, "\n    y[0] = s;\n}\n") == "float "
    assert usage_type("d", "__global__ void k(double *y) {\n    ", "\n    y[0] = d;\n}\n") == "double "
    # Uses that say nothing (passed to an unknown function): no type.
    assert usage_type("q", KERNEL_HEAD + "    ", "\n    helper(q);\n}\n") is None


def test_declaration_types_start_with_the_type_the_name_is_used_as():
    prefix = KERNEL_HEAD + "    double w = 0;\n    "
    assert declaration_types(["const int a = 1;"], prefix, used_as="bool ") == ["bool ", "const int "]
    assert declaration_types([], prefix, 3, used_as="float ") == ["float ", "double ", "int "]


def test_names_assigned_before_they_are_read_are_declared_without_a_value():
    loop = ("\n    for (int64_t l = 0; l < n; l++) {\n      lo = ptr[l], hi = ptr[l + 1];\n      out[l] = hi - lo;\n"
            "    }\n}\n")
    head = "__global__ void k(const int64_t *ptr, int64_t *out, int64_t n) {\n    "
    assert uninitialized_declaration(["hi", "lo"], head, loop) == "int64_t lo, hi;"   # in the order of use
    # Read before it is assigned, assigned from itself, or read after an `if` that may skip it.
    assert uninitialized_declaration(["lo"], head, "\n    out[0] = lo;\n    lo = 1;\n}\n") is None
    assert uninitialized_declaration(["lo"], head, "\n    lo = lo + 1;\n    out[0] = lo;\n}\n") is None
    skipped = "\n    if (n) {\n      lo = 1;\n    }\n    out[0] = lo;\n}\n"
    assert uninitialized_declaration(["lo"], head, skipped) is None
    assert uninitialized_declaration(["found"], FLAG_KERNEL, FLAG_SUFFIX) is None


def test_a_name_the_code_after_updates_from_itself_starts_at_the_identity_of_its_update():
    softmax = "__global__ void sm(const float *x, float *y, int n) {\n    "
    loop = "\n    for (int d = 0; d < n; d++) {\n        sum += expf(x[d] - 1.0f);\n    }\n    y[0] = sum;\n}\n"
    assert initialized_declaration("sum", softmax, loop) == "float sum = 0.0f;"
    # Written as the code around writes its float literals; an update read back from itself.
    plain = "\n    for (int d = 0; d < n; d++) {\n        acc = acc + x[d] * 2.0;\n    }\n    y[0] = acc;\n}\n"
    assert initialized_declaration("acc", softmax, plain) == "float acc = 0.0;"
    # A product starts at one, an int at an int, a flag at the opposite of what it is set to.
    doubling = "\n    while (step < n) {\n        y[step] = 0;\n        step = step * 2;\n    }\n}\n"
    assert initialized_declaration("step", softmax, doubling) == "int step = 1;"
    assert initialized_declaration("found", FLAG_KERNEL, FLAG_SUFFIX) == "bool found = false;"
    # No identity to start a max from, and no update at all.
    running = "\n    for (int d = 0; d < n; d++) {\n        m = fmaxf(m, x[d]);\n    }\n    y[0] = m;\n}\n"
    assert initialized_declaration("m", softmax, running) is None
    assert initialized_declaration("v", softmax, "\n    y[0] = expf(v);\n}\n") is None


def test_a_declaration_of_an_invented_name_is_renamed_to_the_needed_one():
    prefix, suffix = KERNEL_HEAD + "    ", "\n    dest[xIndex] = src[xIndex];\n}\n"
    assert renamed_declaration("int index = blockDim.x * blockIdx.x + threadIdx.x;", "xIndex", prefix, suffix) == \
        "int xIndex = blockDim.x * blockIdx.x + threadIdx.x;"
    # Not a name the file uses, not a self-reference, not several declarators, not a statement of another kind.
    assert renamed_declaration("int n = blockDim.x;", "xIndex", prefix, suffix) is None
    assert renamed_declaration("int j = j + 1;", "xIndex", prefix, suffix) is None
    assert renamed_declaration("int j = 0, k = 1;", "xIndex", prefix, suffix) is None
    assert renamed_declaration("__shared__ float tile[256];", "xIndex", prefix, suffix) is None
    assert renamed_declaration("dest[0] = 1;", "xIndex", prefix, suffix) is None


def test_rank_puts_a_declaration_of_the_wrong_family_and_type_twins_later():
    prefix = FLAG_KERNEL
    texts = ["int64_t found = 0;", "int64_t found = 0;", "bool found = 0;", "bool found = false;"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], prefix, FLAG_SUFFIX)]
    # The int64_t one was drawn twice, but the code after uses `found` as a bool.
    assert ranked[:3] == ["bool found = 0;", "bool found = false;", "int64_t found = 0;"]
    assert without_type("const unsigned int i = threadIdx.x;") == "i=threadIdx.x;"
    assert without_type("int i=threadIdx.x ;") == "i=threadIdx.x;" and without_type("dest[i] = 0;") == "dest[i]=0;"
    index = KERNEL_HEAD + "    ", "\n    dest[i] = src[i];\n}\n"   # `i` an index, in a file of `int`s
    texts = ["int i = threadIdx.x + blockIdx.x * blockDim.x;", "int i = threadIdx.x + blockIdx.x * blockDim.x;",
             "const int i = threadIdx.x + blockIdx.x * blockDim.x;", "int i = threadIdx.x;"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], *index)]
    # `const int i = ...` says what the first says: a different statement gets the second slot.
    assert ranked[:3] == ["int i = threadIdx.x + blockIdx.x * blockDim.x;", "int i = threadIdx.x;",
                          "const int i = threadIdx.x + blockIdx.x * blockDim.x;"]
    # Of the int family, the file's own `int` first, though `unsigned int` was drawn more often.
    texts = ["unsigned int i = 2 * threadIdx.x;", "unsigned int i = 2 * threadIdx.x;", "int i = threadIdx.x;"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], *index)]
    assert ranked[:2] == ["int i = threadIdx.x;", "unsigned int i = 2 * threadIdx.x;"]


def test_declarations_are_started_mostly_with_the_type_the_name_is_used_as(tiny_fim_checkpoint):
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    seen = _stubbed(model, [["out[t] = 1;", "int64_t found = 0;"], [" false"], [" 0"]])
    out = [c.text for c in model.infill(FLAG_KERNEL, FLAG_SUFFIX, n=2, max_tokens=64, temperature=0.7, seed=0)]
    # The drawn int64_t declaration is of the wrong family: declarations are started, `bool `
    # (how the code after uses `found`) with USED_AS_SHARE of the rows, then the drawn type.
    assert [r.prefix[len(FLAG_KERNEL):] for r in seen] == ["", "bool found =", "int64_t found ="]
    assert [r.n for r in seen] == [4, round(4 * USED_AS_SHARE), 4 - round(4 * USED_AS_SHARE)]
    assert out == ["bool found = false;", "int64_t found = 0;"]


def test_a_drawn_declaration_of_an_invented_name_becomes_a_candidate_for_the_needed_one(tiny_fim_checkpoint):
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    prefix, suffix = KERNEL_HEAD + "    ", "\n    dest[xIndex] = src[xIndex];\n}\n"
    seen = _stubbed(model, [["int index = 2 * threadIdx.x;", "dest[0] = 0;"], [" threadIdx.x"]])
    out = [c.text for c in model.infill(prefix, suffix, n=2, max_tokens=64, temperature=0.7, seed=0)]
    # The one type to start with is `int ` (an index; the drawn type too): all rows start with it.
    assert [r.prefix[len(prefix):] for r in seen] == ["", "int xIndex ="] and seen[1].n == 4
    # Drawn 4 times, then the drawn `index` declaration renamed (drawn twice); `dest[0] = 0;`
    # leaves `xIndex` undeclared.
    assert out == ["int xIndex = threadIdx.x;", "int xIndex = 2 * threadIdx.x;"]


def test_one_candidate_asked_for_starts_declarations_of_one_type_only(tiny_fim_checkpoint):
    """n=1: two declaration rows, both the used type's; no batch of 0 rows (which the engine
    would take for a broken decoding path)."""
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    seen = _stubbed(model, [["out[t] = 1;"], [" false"]])
    out = [c.text for c in model.infill(FLAG_KERNEL, FLAG_SUFFIX, n=1, max_tokens=64, temperature=0.7, seed=0)]
    assert [r.prefix[len(FLAG_KERNEL):] for r in seen] == ["", "bool found ="]
    assert [r.n for r in seen] == [FIM_OVERSAMPLE, DECLARE_OVERSAMPLE]
    assert out == ["bool found = false;"]


def test_usage_type_reads_a_long_run_of_spaces_in_linear_time():
    import time

    suffix = "\n  a[0] = v + x" + " " * 5000 + "y;\n  acc += a[0];\n}\n"
    started = time.perf_counter()
    usage_type("acc", "__global__ void k(float *a, float v, float x, float y) {\n  ", suffix)
    assert time.perf_counter() - started < 1.0


def test_an_address_taken_is_no_bitwise_and():
    prefix = "__global__ void k(const float *x, float *out, int n) {\n  "
    suffix = "\n  for (int i = 0; i < n; i++) sum += x[i];\n  atomicAdd(&sum, 1.0f);\n  out[0] = sum;\n}\n"
    assert usage_type("sum", prefix, suffix) == "float "


def test_no_bare_declaration_for_a_name_read_in_its_own_assignment_or_set_under_an_if():
    prefix = "__global__ void k(int64_t *out, int64_t n) {\n  "
    assert uninitialized_declaration(["lo"], prefix, "\n  lo = max(n, lo);\n  out[0] = lo;\n}\n") is None
    assert uninitialized_declaration(["lo"], prefix, "\n  if (n) lo = 1;\n  out[0] = lo;\n}\n") is None
    assert uninitialized_declaration(["lo"], prefix, "\n  lo = n;\n  out[0] = lo;\n}\n") == "int64_t lo;"


FUNC_PREFIX = ("__global__ void func(float *a, int N, float minval, int denom)\n{\n"
               "int idx = threadIdx.x + blockIdx.x * blockDim.x;\nif (idx < N)\n    ")
FUNC_SUFFIX = "\n}\n"


def test_unused_names_are_the_function_names_read_nowhere_around_the_selection():
    from engine.fill.declarations import function_start
    from engine.fill.names import unused_names

    # a, minval and denom appear only where they are declared: the selection is where they are read.
    assert unused_names(FUNC_PREFIX, FUNC_SUFFIX) == {"a", "minval", "denom"}
    # Names of an earlier function are not this one's; outside a function there are none.
    earlier = "__device__ float twice(float unused_arg) { return 2.0f; }\n"
    assert unused_names(earlier + FUNC_PREFIX, FUNC_SUFFIX) == {"a", "minval", "denom"}
    assert function_start(earlier + FUNC_PREFIX) == len(earlier) - 1
    assert unused_names("int x = 1;\n", "\nint y = 2;\n") == set()
    # Read in the suffix: not unused.
    assert unused_names(FUNC_PREFIX, "\na[idx] /= denom;\n}\n") == {"minval"}


def test_an_invented_name_is_renamed_to_the_one_unused_name_and_only_then():
    from engine.fill.names import renamed_invented

    assert renamed_invented("a[idx] = (a[idx] - minval) / scale;", FUNC_PREFIX, FUNC_SUFFIX) == \
        "a[idx] = (a[idx] - minval) / denom;"
    # In scope already, called, in a string, two invented names, or a declaration: left alone.
    assert renamed_invented("a[idx] = (a[idx] - minval) / denom;", FUNC_PREFIX, FUNC_SUFFIX) is None
    assert renamed_invented("a[idx] = (a[idx] - minval) / norm(a[idx]);", FUNC_PREFIX, FUNC_SUFFIX) is None
    assert renamed_invented('a[idx] = scale; printf("scale");', FUNC_PREFIX, FUNC_SUFFIX) is None
    assert renamed_invented("a[idx] = (a[idx] - lo) / scale;", FUNC_PREFIX, FUNC_SUFFIX) is None
    assert renamed_invented("float v = a[idx] / scale;", FUNC_PREFIX, FUNC_SUFFIX) is None
    # Two names the function never uses: which one is meant is not known.
    two = FUNC_PREFIX.replace("int denom", "int denom, int shift")
    assert renamed_invented("a[idx] = (a[idx] - minval) / scale;", two, FUNC_SUFFIX) is None


def test_a_fill_that_misuses_a_cuda_builtin_ranks_with_those_that_cannot_compile():
    from engine.fill.names import misuses_builtins

    assert misuses_builtins("int x = blockDim.xg;") and misuses_builtins("__host__();")
    assert not misuses_builtins("int y = gridDim.y * blockDim.x;") and not misuses_builtins("// blockDim.w")
    assert not misuses_builtins("s.blockDim.q = 1;")   # a member of the user's own struct
    texts = ["y[i] = a * x[i] + blockDim.xy;", "y[i] = x[i];"]
    ranked = [c.text for c in rank_in_scope([_candidate(t) for t in texts], PREFIX, SUFFIX)]
    assert ranked == ["y[i] = x[i];", "y[i] = a * x[i] + blockDim.xy;"]


def test_an_invented_type_is_not_renamed_to_an_unused_value():
    from engine.fill.names import renamed_invented

    for fill in ("a[idx] = (scalar_t)a[idx] / minval;", "a[idx] = static_cast<real>(a[idx]) / minval;",
                 "a[idx] = a[idx] / minval; real *p = a;"):
        assert renamed_invented(fill, FUNC_PREFIX, FUNC_SUFFIX) is None, fill
    # A parenthesised value and a product's operand are still values.
    assert renamed_invented("a[idx] = a[idx] - (scale) * minval;", FUNC_PREFIX, FUNC_SUFFIX) == \
        "a[idx] = a[idx] - (denom) * minval;"
    assert renamed_invented("a[idx] = scale * a[idx] - minval;", FUNC_PREFIX, FUNC_SUFFIX) == \
        "a[idx] = denom * a[idx] - minval;"


def test_a_draw_with_too_few_good_candidates_is_topped_up_once(tiny_fim_checkpoint):
    """The engine's control flow over fixed draws (the model itself is tested above): a draw
    with fewer than n candidates in shape and scope gets one more draw, with another seed; one
    with n good ones does not."""
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    draws = {"first": ["y[i] = foo(x[i]);"] * 5 + [STATEMENT], "second": ["y[i] = x[i];", "y[i] = 2.0f * x[i];"]}
    seeds = []

    def decode_batch(request, *args, **kwargs):
        seeds.append(request.sampling.seed)
        texts = draws["first"] if len(seeds) == 1 else draws["second"]
        return [_candidate(texts[k % len(texts)]) for k in range(request.n)]

    model.decode_batch = decode_batch
    out = [c.text for c in model.infill(PREFIX, SUFFIX, n=3, max_tokens=8, temperature=0.7, seed=5)]
    assert seeds == [5, 5 + TOP_UP_SEED]
    assert sorted(out) == sorted([STATEMENT, "y[i] = x[i];", "y[i] = 2.0f * x[i];"])   # no foo(): it is not in the file
    seeds.clear()
    draws["first"] = [STATEMENT, "y[i] = x[i];", "y[i] = 2.0f * x[i];"]
    out = [c.text for c in model.infill(PREFIX, SUFFIX, n=3, max_tokens=8, temperature=0.7, seed=5)]
    assert seeds == [5] and sorted(out) == sorted(draws["first"])
    # A draw that agrees on one good answer shows it (and its repeats): nothing bad to replace.
    seeds.clear()
    draws["first"] = [STATEMENT]
    out = [c.text for c in model.infill(PREFIX, SUFFIX, n=3, max_tokens=8, temperature=0.7, seed=5)]
    assert seeds == [5] and set(out) == {STATEMENT}


ROOFLINE = """__global__ void roofline(float* out, float gemm_ai, float attn_ai, float ln_n) {
    if (threadIdx.x == 0) {
        float ln_ai = 5.0f * ln_n / (8.0f * ln_n);
        out[0] = gemm_ai;
        out[1] = attn_ai;
        out[2] = ln_ai;
        out[3] = (ln_ai >= 1.0f) ? 1.0f : 0.0f;
    }
}
"""


def test_an_invented_name_is_replaced_by_a_name_of_the_file_the_model_chooses():
    """The shipped model, on the kind of line where it invents a name (`attn_biasii` where the
    file has `ln_ai`): each repair keeps the drawn text around the name and reads only names the
    file has, chosen by the model from them."""
    import engine

    model = engine.load("builtin", device="cpu")
    at = ROOFLINE.index("out[2] = ln_ai;")
    prefix, suffix = ROOFLINE[:at], ROOFLINE[at + len("out[2] = ln_ai;"):]
    from engine.types import InfillRequest, Sampling

    request = InfillRequest(prefix, suffix, n=4, max_tokens=40, sampling=Sampling(temperature=1.0, seed=3))
    drawn = [_candidate("out[2] = attn_biasii;"), _candidate("out[2] = attn_bi + attn_bi;")]
    repairs = scope_repairs(request, drawn, model.drawer())
    scope = scope_of(prefix, suffix)
    assert repairs and len(repairs) <= 2 * REPAIR_ROWS
    for c in repairs:
        assert not unknown_names(c.text, scope), c.text
        name = c.text.removeprefix("out[2] = ").split(";")[0].split(" + ")[0]
        assert name in file_names(prefix, suffix)
        assert c.text in (f"out[2] = {name};", f"out[2] = {name} + {name};")


SAXPY_HEAD = ("__global__ void saxpy(float a, const float* x, float* y, int n)\n{\n"
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) {\n        ")
SAXPY_REST = "x[i] + y[i];\n    }\n}\n"
SECOND_COPY = ("\n    }\n}\n\n__global__ void blend(float alpha, const float* x, float* y, int n)\n{\n"
               "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) {")


def test_a_selection_that_cuts_a_statement_keeps_its_fill_inside_the_function():
    """`y[i] = a * ` selected out of `y[i] = a * x[i] + y[i];`: the model writes the statement,
    then the lines after it and a second copy of the function. The fill is cut where the rest
    of the line begins; decoding may stop once a whole line shows it."""
    ran_on = "y[i] = a * x[i] + y[i];" + SECOND_COPY
    assert cut_to_span(ran_on, SAXPY_HEAD, SAXPY_REST) == "y[i] = a * "
    assert cut_to_span("y[i] = a * x[i] + y[i];", SAXPY_HEAD, SAXPY_REST) == "y[i] = a * "
    assert span_ended("y[i] = a * x[i] + y[i];\n", SAXPY_HEAD, SAXPY_REST)
    assert not span_ended("y[i] = a * x[i] + y", SAXPY_HEAD, SAXPY_REST)
    # Only the rest after code on its line counts: a fill that is just the rest is left alone.
    assert cut_to_span("x[i] + y[i];", SAXPY_HEAD, SAXPY_REST) == "x[i] + y[i];"


def test_a_fill_that_closes_the_function_is_cut_before_that_line():
    """Whatever else it writes, a fill does not close the body of the function the selection is
    in (the suffix closes it): no second function from a fill."""
    fill = "y[i] = 2.0f * x[i];" + SECOND_COPY
    cut = cut_to_span(fill, SAXPY_HEAD, SAXPY_REST)
    assert "__global__" not in cut and cut.startswith("y[i] = 2.0f * x[i];")
    assert span_ended(fill + "\n", SAXPY_HEAD, SAXPY_REST)
    # A selection of the function's own closing brace may close it.
    prefix, suffix = "__global__ void k(float* y) {\n    y[0] = 1;\n", "\nint main() { return 0; }\n"
    assert cut_to_span("}\n", prefix, suffix) == "}\n"
