"""Fills spelt the way their file spells things (engine.fill.spelling), and LocalEngine handing
the user its candidates in that spelling."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.fill import spelling
from engine.decoding.local import LocalEngine
from engine.fill.spelling import prior, prior_choice, respelled
from engine.types import Candidate

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())

# Two kernels of one file: the first writes its thread index with blockDim first and updates
# with compound assignments; the selection is in the second.
TRANSPOSE_HEAD = """__global__ void scale_rows(float *m, const float *s, int width, int height)
{
    int col = blockDim.x*blockIdx.x + threadIdx.x;
    if (col < width) {
        for (int r = 0; r < height; r++)
            m[r * width + col] *= s[r];
    }
}

__global__ void transpose(float *out, const float *in, int width, int height)
{
    int xIndex = blockDim.x*blockIdx.x + threadIdx.x;
    """
TRANSPOSE_TAIL = """
    if (xIndex < width && yIndex < height)
        out[xIndex * height + yIndex] = in[yIndex * width + xIndex];
}
"""


def test_an_expression_the_file_writes_is_written_as_the_file_writes_it():
    # Same operands, other order and spacing: the file's own text.
    assert respelled("int yIndex = threadIdx.x + blockIdx.x * blockDim.x;", TRANSPOSE_HEAD, TRANSPOSE_TAIL) \
        == "int yIndex = blockDim.x*blockIdx.x + threadIdx.x;"
    # The y coordinate: the file's order of the same kind of operands, the fill's own spacing.
    assert respelled("int yIndex = blockIdx.y * blockDim.y + threadIdx.y;", TRANSPOSE_HEAD, TRANSPOSE_TAIL) \
        == "int yIndex = blockDim.y * blockIdx.y + threadIdx.y;"
    # Inside brackets and calls too.
    assert respelled("out[threadIdx.x + blockIdx.x * blockDim.x] = 0.0f;", TRANSPOSE_HEAD, TRANSPOSE_TAIL) \
        == "out[blockDim.x*blockIdx.x + threadIdx.x] = 0.0f;"


def test_nothing_changes_where_the_file_says_nothing_or_the_swap_would_reassociate():
    head = "__global__ void saxpy(float a, const float *x, float *y, int n) {\n    int i = threadIdx.x;\n    "
    tail = "\n}\n"
    for fill in ("y[i] = a * x[i] + y[i];", "int j = blockIdx.x * blockDim.x + threadIdx.x;", "", "}\n"):
        assert respelled(fill, head, tail) == fill
    # The file adds `b + 2.0f` with the number first, but `a + b + 2.0f` is (a + b) + 2.0f:
    # moving it to the front would add in another order (floats round differently); a single
    # pair still swaps.
    head = "__global__ void k(float *o, float a, float b) {\n    o[0] = 2.0f + b;\n    "
    assert respelled("o[1] = a + b + 2.0f;", head, tail) == "o[1] = a + b + 2.0f;"
    assert respelled("o[1] = b + 2.0f;", head, tail) == "o[1] = 2.0f + b;"
    # A cast binds to its operand: `(double)a * 2` is no `a * 2` to swap (`(double)2 * a` would
    # multiply in another type); nor is `(float)-a * 2`, read as `(float) - a * 2`.
    head = "__global__ void k(double *o, float a, float b) {\n    o[0] = 2 * a;\n    "
    assert respelled("o[1] = (double)a * 2;", head, tail) == "o[1] = (double)a * 2;"
    assert respelled("o[1] = (float)-a * 2;", head, tail) == "o[1] = (float)-a * 2;"
    assert respelled("o[1] = a * 2;", head, tail) == "o[1] = 2 * a;"
    # `-` and `/` do not commute.
    head = "__global__ void k(float *o, float a, float b) {\n    o[0] = b - a;\n    "
    assert respelled("o[1] = a - b;", head, tail) == "o[1] = a - b;"


def test_updates_are_written_compound_or_spelt_out_as_the_file_writes_them():
    head = "__global__ void doublify(float *a, float *b)\n{\n    int idx = threadIdx.x;\n    b[idx] += 1.0f;\n    "
    tail = "\n    b[idx] *= a[idx];\n}\n"
    assert respelled("a[idx] = a[idx] * 2;", head, tail) == "a[idx] *= 2;"
    # `x = e + x` is not `x += e` where + does not commute (a string prepends): kept.
    assert respelled("a[idx] = 2 + a[idx];", head, tail) == "a[idx] = 2 + a[idx];"
    # Not the same update: (a * 2) + 1, a division's right operand, another element.
    for fill in ("a[idx] = a[idx] * 2 + 1;", "a[idx] = 2 / a[idx];", "a[idx + 1] = a[idx] * 2;"):
        assert respelled(fill, head, tail) == fill
    # A target with a call or ++ in it is evaluated once by `*=`, twice by `x = x * e`.
    assert respelled("a[f(idx)] = a[f(idx)] * 2;", head, tail) == "a[f(idx)] = a[f(idx)] * 2;"
    # A file of spelt-out updates gets them spelt out; `s *= a + b` would need brackets: kept.
    head = "__global__ void sum(const float *x, float *out, int n) {\n    float s = 0.0f;\n    s = s + x[0];\n    "
    tail = "\n    out[0] = s;\n}\n"
    assert respelled("s += x[1];", head, tail) == "s = s + x[1];"
    assert respelled("s *= x[1] + x[2];", head, tail) == "s *= x[1] + x[2];"
    # A file with neither: the corpus's commoner kind, compound (test_where_the_file_says_nothing_...).
    assert respelled("s += x[1];", "__global__ void k(float *x) {\n    float s = x[0];\n    ", tail) == "s += x[1];"


LEAF_HEAD = """__global__ void ShrinkKernel(const double rate, double* leaf_value, const int num_leaves) {
  const int leaf = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (leaf < num_leaves) {
    leaf_value[leaf] *= rate;
  }
}

__global__ void AddKernel(const double val, double* leaf_value, const int num_leaves) {
  """
LEAF_TAIL = """
  if (index < num_leaves) {
    leaf_value[index] += val;
  }
}
"""


def test_a_declaration_takes_the_qualifiers_and_cast_of_the_files_declaration_of_its_kind():
    expected = "const int index = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);"
    assert respelled("int index = blockIdx.x * blockDim.x + threadIdx.x;", LEAF_HEAD, LEAF_TAIL) == expected
    assert respelled("int index = threadIdx.x + blockIdx.x * blockDim.x;", LEAF_HEAD, LEAF_TAIL) == expected
    # Another type, another value: no declaration of its kind in the file.
    for fill in ("int64_t index = blockIdx.x * blockDim.x + threadIdx.x;", "int index = threadIdx.x;"):
        assert respelled(fill, LEAF_HEAD, LEAF_TAIL) == fill
    # The code after assigns the name: no `const` (it would not compile), so no form to copy.
    tail = "\n  index += 1;\n  leaf_value[index] += val;\n}\n"
    assert respelled("int index = blockIdx.x * blockDim.x + threadIdx.x;", LEAF_HEAD, tail) \
        == "int index = blockIdx.x * blockDim.x + threadIdx.x;"


def test_the_engine_hands_over_its_candidates_in_the_files_spelling(tiny_fim_checkpoint):
    model = LocalEngine.from_folder(tiny_fim_checkpoint, device="cpu")
    drawn = ["int yIndex = blockIdx.y * blockDim.y + threadIdx.y;", "int yIndex = threadIdx.y;",
             "int yIndex = blockDim.y * blockIdx.y + threadIdx.y;"]

    def decode_batch(request, *args, **kwargs):
        return [Candidate(drawn[k % len(drawn)], 4, 4, 0.0, "eos", "") for k in range(request.n)]

    model.decode_batch = decode_batch
    out = [c.text for c in model.infill(TRANSPOSE_HEAD, TRANSPOSE_TAIL, n=2, max_tokens=64, temperature=0.7,
                                        seed=0)]
    # The two spellings of one statement are one candidate, first (drawn most often); the slot
    # left goes to another statement.
    assert out == ["int yIndex = blockDim.y * blockIdx.y + threadIdx.y;", "int yIndex = threadIdx.y;"]
    # Three asked for, two statements drawn: the model's own spelling of the first takes the
    # third slot (a merged twin leaves no slot empty).
    out = [c.text for c in model.infill(TRANSPOSE_HEAD, TRANSPOSE_TAIL, n=3, max_tokens=64, temperature=0.7,
                                        seed=0)]
    assert out == ["int yIndex = blockDim.y * blockIdx.y + threadIdx.y;", "int yIndex = threadIdx.y;",
                   "int yIndex = blockIdx.y * blockDim.y + threadIdx.y;"]
    greedy = model.infill(TRANSPOSE_HEAD, TRANSPOSE_TAIL, n=1, max_tokens=64, temperature=0.0)
    assert greedy[0].text == "int yIndex = blockDim.y * blockIdx.y + threadIdx.y;"


def test_operands_are_reordered_only_where_they_are_numbers():
    """Operands of * and + commute for numbers, not for strings or matrices (host code in a .cu,
    overloaded operators): without a thread coordinate or a number in it, or with a string,
    sizeof or a type's word, an expression keeps its order."""
    tail = "\n}\n"
    head = "void k() {\n    std::string a = ext + base;\n    Mat m = r * q;\n    o[0] = dx * (i);\n    int m2 = n * *p;\n    "
    for fill in ("std::string b = base + ext;", "Mat w = q * r;", "o[1] = float(i) * dx;", "o[1] = sizeof(i) * dx;",
                 "void *v = malloc(sizeof *p * n);"):
        assert respelled(fill, head, tail) == fill
    # A macro's body expands its arguments unbracketed: a preprocessor line is left alone.
    head = "__global__ void k(int *o, int a) {\n    o[0] = 2 * a;\n    "
    assert respelled("#define MUL(a) a*2\n", head, tail) == "#define MUL(a) a*2\n"


def test_an_update_is_rewritten_only_when_its_target_is_a_plain_lvalue():
    head = "__global__ void sum(const float *x, float *out, int n) {\n    float s = 0.0f;\n    s = s + x[0];\n    "
    tail = "\n    out[0] = s;\n}\n"
    for fill in ("else s += x[1];", "return s += 1;", "case 1: s += x[1];", "do s += 1;", "default: s -= 1;",
                 "L: s *= 2;", "i, s += 2;"):
        assert respelled(fill, head, tail) == fill
    assert respelled("p->acc[2] += x[1];", head, tail) == "p->acc[2] = p->acc[2] + x[1];"


def test_const_is_copied_only_where_nothing_after_can_change_the_name():
    for tail in ("\n  atomicAdd(&index, 1);\n}\n", "\n  std::swap(index, other);\n}\n",
                 "\n  std::cin >> index;\n}\n", "\n  int &r = index; r = 3;\n}\n"):
        fill = "int index = blockIdx.x * blockDim.x + threadIdx.x;"
        assert respelled(fill, LEAF_HEAD, tail) == fill, tail
    # Only const is copied, onto a value (not a pointer: `const float* p` points to const), and a
    # drawn volatile or register is kept as drawn.
    head = "__global__ void k(float *a) {\n  const float* q = a + 2 * threadIdx.x;\n  volatile int v = threadIdx.x * 2;\n  "
    for fill in ("float* p = a + 2 * threadIdx.x;", "int w = threadIdx.x * 2;", "volatile int w = 2 * threadIdx.x;"):
        assert "const" not in respelled(fill, head, "\n  p[0] = 1.0f;\n}\n")


# One kernel alone: nothing around the selection says how this file spells things.
ALONE_HEAD = "__global__ void scale(float *a, int n)\n{\n    "
ALONE_TAIL = "\n    if (i < n)\n        a[i] = 2.0f * a[i];\n}\n"


def test_where_the_file_says_nothing_the_corpus_s_commoner_spelling_decides():
    # engine/spelling_prior.json, counted on the corpus: `blockIdx.x * blockDim.x` 1276 times
    # against 360, the product before threadIdx.x 1104 against 446, `int` index declarations
    # without const 563 against 331, compound updates 12045 against 551.
    for fill in ("int i = threadIdx.x + blockIdx.x * blockDim.x;", "int i = blockDim.x * blockIdx.x + threadIdx.x;",
                 "const int i = threadIdx.x + blockDim.x * blockIdx.x;"):
        assert respelled(fill, ALONE_HEAD, ALONE_TAIL) == "int i = blockIdx.x * blockDim.x + threadIdx.x;"
    assert respelled("unsigned int i = threadIdx.x + blockIdx.x*blockDim.x;", ALONE_HEAD, ALONE_TAIL) \
        == "unsigned int i = blockIdx.x*blockDim.x + threadIdx.x;"
    assert respelled("a[i] = a[i] * 2.0f;", "__global__ void k(float *a) {\n    int i = threadIdx.x;\n    ", "\n}\n") \
        == "a[i] *= 2.0f;"
    assert respelled("int j = 1 + i;", ALONE_HEAD, ALONE_TAIL) == "int j = i + 1;"
    # The file's own spelling beats the corpus's (TRANSPOSE_HEAD writes blockDim first).
    assert respelled("int yIndex = blockIdx.y * blockDim.y + threadIdx.y;", TRANSPOSE_HEAD, TRANSPOSE_TAIL) \
        == "int yIndex = blockDim.y * blockIdx.y + threadIdx.y;"
    # Names that are no numbers keep their order (`a * x[i]` may be an overloaded product), and
    # a kind the corpus splits evenly is left as drawn.
    assert respelled("a[i] = s * a[i];", ALONE_HEAD, ALONE_TAIL) == "a[i] = s * a[i];"
    assert prior_choice({"x": 55, "y": 45}) is None and prior_choice({"x": 60, "y": 40}) == "x"


def test_the_prior_is_counted_on_code_by_others_and_checked_on_held_out_packages():
    counts = prior()
    assert counts == json.loads(spelling.PRIOR_FILE.read_text())
    assert counts["files"] > 1000 and counts["min_uses"] >= 20
    assert prior_choice(counts["orders"]["*{blockDim.#|blockIdx.#}"]) == "blockIdx.#"
    assert prior_choice(counts["updates"]) == "compound"
    for what in ("orders", "updates", "declarations"):
        row = counts["held_out"][what]
        assert row["uses"] > 300 and row["share"] > 0.8, (what, row)


def test_without_the_prior_only_the_file_decides(tmp_path, monkeypatch):
    missing = tmp_path / "none.json"
    monkeypatch.setattr(spelling, "PRIOR_FILE", missing)
    prior.cache_clear()
    try:
        fill = "const int i = threadIdx.x + blockIdx.x * blockDim.x;"
        assert respelled(fill, ALONE_HEAD, ALONE_TAIL) == fill
        missing.write_text("{not json")
        prior.cache_clear()
        assert respelled(fill, ALONE_HEAD, ALONE_TAIL) == fill
    finally:
        prior.cache_clear()


def test_the_spelling_benchmark_replays_draws_with_and_without_the_prior(tmp_path):
    head = "__global__ void doublify(float *a, int n)\n{\n    int idx = threadIdx.x;\n    "
    rows = [
        # Drawn spelt out; the kernel writes no update, the original is compound.
        {"prefix": head, "suffix": "\n}\n", "middle": "a[idx] *= 2;",
         "drawn": ["a[idx] = a[idx] * 2;", "a[idx] = 2;", "a[idx] = a[idx] * 2;"]},
        # Drawn as written: found either way.
        {"prefix": ALONE_HEAD, "suffix": ALONE_TAIL, "middle": "int i = blockIdx.x * blockDim.x + threadIdx.x;",
         "drawn": ["int i = blockIdx.x*blockDim.x + threadIdx.x;"]},
    ]
    record = tmp_path / "draws.json"
    record.write_text(json.dumps({"rows": rows}))
    out = subprocess.run([sys.executable, "benchmarks/spelling_eval.py", "replay", str(record)],
                         capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "no prior: the original among the 4 in 1 of 2" in out.stdout
    assert "prior, share 0.60: the original among the 4 in 2 of 2" in out.stdout
