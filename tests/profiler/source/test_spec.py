"""The `dice:` spec: good specs evaluate, bad ones say where and what was expected."""

from __future__ import annotations

import pytest

from profiler.checks.spec import spec_errors_as_diagnostics
from profiler.source.spec import SpecError, parse_spec, spec_lines, spec_template

KERNEL = "__global__ void saxpy(float a, const float* __restrict__ x, float* y, int n) { }\n"


def spec_of(lines: str, kernel: str = KERNEL):
    return parse_spec(lines + kernel)


def error_of(lines: str, kernel: str = KERNEL) -> SpecError:
    with pytest.raises(SpecError) as info:
        spec_of(lines, kernel)
    return info.value


def test_example_spec(repo_root):
    spec = parse_spec((repo_root / "examples" / "saxpy.cu").read_text())["saxpy"]
    assert spec.args == {"a": 2.5, "n": 1 << 24}
    assert spec.buffers == {"x": 1 << 24, "y": 1 << 24}
    assert spec.grid == ((1 << 24) // 256, 1, 1) and spec.block == (256, 1, 1)
    assert spec.inout == {"y"}
    assert spec.shared == 0


def test_expression_grammar_precedence_and_c_integer_division():
    spec = spec_of(
        "// dice: let n = (3 + 4) * 2 - 10 / 4 % 3 + (1 << 4 >> 2)\n"
        "// dice: let a = -7 / 2 * 1.5\n"
        "// dice: let m = -7 / 2\n"
        "// dice: let s = 1 + 1 << 2\n"
        "// dice: let r = -7 % 3\n"
        "// dice: flops = 2 * n\n"
        "// dice: buffer x[n * 2], y[n]\n"
        "// dice: launch grid=(n + 255) / 256, block=(16, 8), shared=4 * 64\n"
    )["saxpy"]
    assert spec.values["n"] == 14 - (10 // 4) % 3 + (16 >> 2)
    assert spec.values["s"] == 8  # shifts bind looser than +, as in C
    assert spec.values["m"] == -3 and spec.values["r"] == -1  # truncation toward zero, as in C
    assert spec.values["a"] == -4.5
    assert spec.buffers == {"x": 32, "y": 16}
    assert spec.block == (16, 8, 1) and spec.shared == 256 and spec.grid == (1, 1, 1)
    assert spec.flops == 32.0


@pytest.mark.parametrize(
    "lines, line, column, expected",
    [
        ("// dice: let n = 1 <<\n", 1, 22, "expected a number, a name or '(', got the end of the line"),
        ("// dice: let n = 3 $ 4\n", 1, 20, "expected a number, a name or an operator, got '$'"),
        ("// dice: let n = m + 1\n", 1, 18, "expected a name bound by `let`, got 'm'"),
        ("// dice: lett n = 1\n", 1, 10, "expected one of let, buffer, inout, launch, flops, got 'lett'"),
        ("// dice: let n = 4\n// dice: buffer x[n) y[n]\n", 2, 20, "expected ']', got ')'"),
        ("// dice: let n = 4\n//   dice:   launch grid=(n, 1, 1, 1), block=1\n", 2, 26, "tuple of up to 3"),
        ("// dice: let n = 4\n// dice: launch grid=n, block=2048\n", 2, 10, "at most 1024 threads"),
        ("// dice: let n = 4 % 0\n", 1, 20, "divisor that is not zero"),
        ("// dice: let n = 1.5 << 2\n", 1, 22, "expected integers around '<<'"),
        ("// dice: let n = (1, 2)\n", 1, 20, "a tuple is allowed only"),
    ],
)
def test_syntax_errors_have_line_column_and_expectation(lines, line, column, expected):
    err = error_of(lines)
    assert (err.line, err.column) == (line, column), err
    assert expected in err.message


def test_missing_pieces_name_the_parameter():
    err = error_of("// dice: let n = 4\n// dice: let a = 1.0\n// dice: buffer x[n]\n// dice: launch grid=1, block=4\n")
    assert "buffer y[COUNT]" in err.message and err.line == 1
    err = error_of("// dice: let n = 4\n// dice: buffer x[n], y[n]\n// dice: launch grid=1, block=4\n")
    assert "let a = ..." in err.message
    err = error_of("// dice: let n = 4\n// dice: let a = 1.0\n// dice: buffer x[n], y[n]\n")
    assert "launch" in err.message
    err = error_of("// dice: let n = 4.5\n// dice: let a = 1\n// dice: buffer x[2], y[2]\n// dice: launch grid=1, block=2\n")
    assert "expected an integer for int parameter n" in err.message
    err = error_of("// dice: let n = 4\n// dice: let a = 1\n// dice: buffer x[n], q[n]\n// dice: launch grid=1, block=4\n")
    assert (err.line, err.column) == (3, 23) and "pointer parameter of saxpy, got 'q'" in err.message
    err = error_of("// dice: let n = 4\n// dice: inout x\n")
    assert (err.line, err.column) == (2, 16) and "non-const pointer" in err.message


def test_lines_above_a_kernel_belong_to_it_and_leading_lines_are_shared():
    src = (
        "// dice: let n = 1024\n"
        "// dice: launch grid=n / 256, block=256\n"
        "__global__ void first(const float* x, float* y, int n) { }\n"
        "\n"
        "// dice: buffer x[n], y[n]\n"
        "__global__ void second(const float* x, float* y, int n) { }\n"
        "// dice: buffer x[n], y[n]\n"
        "// dice: launch grid=1, block=32\n"
        "__global__ void third(const float* x, float* y, int n) { }\n"
        "__global__ void no_spec(float* z) { }\n"
    )
    # `first` has the shared lines only and no buffers: a spec error on its own lines.
    with pytest.raises(SpecError, match="buffer x"):
        parse_spec(src)
    src = src.replace("// dice: launch grid=n / 256", "// dice: buffer x[n], y[n]\n// dice: launch grid=n / 256")
    specs = parse_spec(src)
    assert sorted(specs) == ["first", "second", "third"]
    assert specs["second"].grid == (4, 1, 1)  # inherits the shared launch
    assert specs["third"].block == (32, 1, 1)


def test_a_dice_line_inside_a_string_or_block_comment_is_not_spec():
    src = 'const char* s = "// dice: let n = oops";\n/*\n// dice: nonsense\n*/\n' + KERNEL
    assert parse_spec(src) == {}


@pytest.mark.parametrize(
    "kernel",
    [
        KERNEL,
        "__global__ void row_sum(const float* __restrict__ m, float* out, int rows, int cols) { }\n",
        "__global__ void fill(float* out) { }\n",
        "    __global__ void scale(double s, const double* in, double* out, long long count) { }\n",
    ],
)
def test_template_parses_as_a_complete_spec(kernel):
    name = kernel.split("void ")[1].split("(")[0]
    template = spec_template(kernel, name)
    assert all(line.lstrip().startswith("// dice: ") for line in template.splitlines())
    spec = parse_spec(template + kernel)[name]
    pointers = [p for p in kernel.split("(")[1].split(",") if "*" in p]
    assert len(spec.buffers) == len(pointers)
    assert spec.block == (256, 1, 1)
    total = next(iter(spec.buffers.values()))
    assert spec.grid[0] * 256 >= total


@pytest.mark.parametrize(
    "expression, column, expected",
    [
        ("1 << -1", 20, "expected a shift count from 0 to 63, got -1"),
        ("1 << 100000000000", 20, "expected a shift count from 0 to 63, got 100000000000"),
        ("1 >> 64", 20, "shift count from 0 to 63"),
        ("(1 << 40) * (1 << 40)", 28, "fits in 64 bits, got about 2**80"),
        ("-(1 << 63) - (1 << 63)", 29, "fits in 64 bits"),
        ("123456789012345678901234567890", 18, "a number that fits in 64 bits"),
        ("1" + "0" * 5000, 18, "a number that fits in 64 bits"),  # past Python's int-parse limit
        ("1e400", 18, "fits in 64 bits, got inf"),
        ("1e19 * 1e19", 23, "fits in 64 bits"),
    ],
)
def test_values_are_bounded_before_they_are_computed(expression, column, expected):
    source = f"// dice: let n = {expression}\n" + KERNEL
    err = error_of(f"// dice: let n = {expression}\n")
    assert (err.line, err.column) == (1, column), err
    assert expected in err.message
    # the editor's diagnostics get the same positioned error (a huge shift used to eat memory
    # and leave the file without diagnostics)
    (diagnostic,) = spec_errors_as_diagnostics(source)
    assert (diagnostic.line, diagnostic.column) == (1, column) and expected in diagnostic.message


def test_the_largest_values_still_evaluate():
    spec = spec_of("// dice: let big = (1 << 63) + ((1 << 63) - 1)\n// dice: let a = -(1 << 63)\n// dice: let n = 4\n"
                   "// dice: buffer x[4], y[4]\n// dice: launch grid=1, block=4\n")["saxpy"]
    assert spec.values == {"big": (1 << 64) - 1, "a": -(1 << 63), "n": 4}


@pytest.mark.parametrize(("lines", "expected"), [
    # A value a 64-bit expression holds but the parameter's C type does not.
    ("let n = 1 << 62\n// dice: buffer x[4], y[4]\n// dice: launch grid=1, block=4",
     "expected n to fit its type int (-2147483648 to 2147483647), got 4611686018427387904"),
    ("let n = -1\n// dice: buffer x[4], y[4]\n// dice: launch grid=1, block=4", None),
    # Buffers no GPU holds, found before anything is allocated.
    ("let n = 1 << 30\n// dice: buffer x[n], y[1 << 62]\n// dice: launch grid=1, block=4",
     "expected buffers of at most 128 GiB in all (more than a GPU holds), got about 2**64 bytes with y[4611686018427387904]"),
    ("let n = 4\n// dice: buffer x[n], y[n]\n// dice: launch grid=1 << 40, block=4",
     "expected grid= within CUDA's limits (x, y, z at most 2147483647, 65535, 65535), got (1099511627776, 1, 1)"),
    ("let n = 4\n// dice: buffer x[n], y[n]\n// dice: launch grid=1, block=(1, 1, 128)",
     "expected block= within CUDA's limits (x, y, z at most 1024, 1024, 64), got (1, 1, 128)"),
    ("let n = 4\n// dice: buffer x[n], y[n]\n// dice: launch grid=1, block=4, shared=1 << 40",
     "expected shared= at most 232448 bytes (227 KiB, the most a block can have), got 1099511627776"),
])
def test_sizes_are_checked_for_sense_before_anything_is_allocated(lines, expected):
    found = spec_errors_as_diagnostics("// dice: let a = 2.5\n// dice: " + lines + "\n" + KERNEL)
    assert [d.message for d in found] == ([f"dice spec: {expected}"] if expected else [])


@pytest.mark.parametrize("expression", ["(" * 3000 + "1" + ")" * 3000, "-" * 3000 + "1", "+-" * 2000 + "1"])
def test_nesting_thousands_deep_is_a_spec_error_not_a_recursion_error(expression):
    (found,) = spec_errors_as_diagnostics(f"// dice: let n = {expression}\n// dice: let a = 1.0\n" + KERNEL)
    assert found.message == "dice spec: expected an expression nested at most 64 deep"
    assert (found.line, found.column) == (1, 18 + 64)


TWO_KERNELS = (
    "__global__ void scale(const float* x, float* y, int n) { }\n"
    "\n"
    "__global__ void negate(const float* a, float* b, int n) { }\n"
)


def test_two_kernels_each_with_its_own_spec():
    src = (
        "// dice: let n = 1024\n// dice: buffer x[n], y[n]\n// dice: inout y\n// dice: launch grid=4, block=256\n"
        "__global__ void scale(const float* x, float* y, int n) { }\n"
        "\n"
        "// dice: let n = 64\n// dice: buffer a[n], b[n]\n// dice: launch grid=1, block=64\n"
        "__global__ void negate(const float* a, float* b, int n) { }\n"
    )
    specs = parse_spec(src)
    assert specs["scale"].buffers == {"x": 1024, "y": 1024} and specs["scale"].inout == {"y"}
    assert specs["negate"].buffers == {"a": 64, "b": 64} and specs["negate"].inout == frozenset()
    assert specs["negate"].args == {"n": 64} and specs["negate"].block == (64, 1, 1)
    assert spec_errors_as_diagnostics(src) == []


def test_two_kernels_after_add_spec_on_each():
    # what the editor's "Add benchmark spec" does: the template inserted above each kernel
    src = TWO_KERNELS
    for name in ("scale", "negate"):
        line = next(i for i, text in enumerate(src.splitlines(True)) if f"void {name}(" in text)
        lines = src.splitlines(True)
        src = "".join(lines[:line]) + spec_template(src, name) + "".join(lines[line:])
    specs = parse_spec(src)
    assert sorted(specs["scale"].buffers) == ["x", "y"] and sorted(specs["negate"].buffers) == ["a", "b"]


def test_a_later_kernel_still_reports_its_own_bad_buffer():
    src = (
        "// dice: let n = 4\n// dice: buffer x[n], y[n]\n// dice: launch grid=1, block=4\n"
        "__global__ void scale(const float* x, float* y, int n) { }\n"
        "// dice: buffer q[n], b[n]\n"
        "__global__ void negate(const float* a, float* b, int n) { }\n"
    )
    err = error_of(src, kernel="")
    assert (err.line, err.column) == (5, 17) and "pointer parameter of negate, got 'q'" in err.message


def test_spec_lines_are_the_directives_the_parser_reads():
    """A result's cache key holds the document's spec lines: the same ones parse_spec reads,
    so a `dice:` inside a string or a block comment changes neither."""
    source = (
        "//  dice: let n = 256   \n"
        "/* dice: let n = 512 */\n"
        'const char* s = "// dice: let n = 1024";\n'
        "// dice: buffer y[n]\n"
        "// dice: launch grid=1, block=n\n"
        "__global__ void k(float* y, int n) { y[threadIdx.x] = 0; }\n"
    )
    assert spec_lines(source) == "dice: let n = 256\ndice: buffer y[n]\ndice: launch grid=1, block=n"
    assert parse_spec(source)["k"].values["n"] == 256
    assert spec_lines("__global__ void k() {}\n") == ""


def test_a_row_per_block_kernel_gets_a_block_per_row_and_threads_along_x():
    # `r = blockIdx.y` alone: one block per row, 256 threads along the row.
    kernel = ("__global__ void copy_rows(const float* x, float* y, int rows, int cols) {\n"
              "    int r = blockIdx.y;\n    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (r < rows && c < cols) y[r * cols + c] = x[r * cols + c];\n}\n")
    template = spec_template(kernel, "copy_rows")
    assert template.splitlines()[-1] == "// dice: launch grid=((cols + 255) / 256, rows), block=(256, 1)"
    spec = parse_spec(template + kernel)["copy_rows"]
    assert spec.grid == (16, 4096, 1) and spec.block == (256, 1, 1)
    assert spec.buffers == {"x": 4096 * 4096, "y": 4096 * 4096}
