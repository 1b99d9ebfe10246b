"""Ordinary CUDA kernels, spelt the many ways people write them, for the built-in model's corpus.

The built-in model's first job is the README's: fill one statement of a small kernel that a
user wrote in an editor. Library code on PyPI is template-heavy, and training/corpus/generate_kernels.py
writes every kernel in one house style (`int idx = blockIdx.x * blockDim.x + threadIdx.x;`),
so a model trained on them writes that line whatever the file around it says. These kernels are
the small ones of tutorials, course exercises and wrapper scripts, and vary what varies between
authors: the order and spacing of the index expression, its type and name (`const int i`,
`unsigned int tid`, `int index`), 1D or 2D threads, bounds checks (a block, one line, an early
return, none), pointer and brace style, indentation, float literals (`2`, `2.0`, `2.0f`), names
of arrays and counts, kernel names that say what the body does (`vecAdd`, `saxpy`,
`scale_array`) or nothing (`kernel`, `my_kernel`, `f`), in-place updates (`a[i] *= 2;`), and
the code around a kernel: a host `main` with cudaMalloc/cudaMemcpy and the launch, or the CUDA
string of a PyCUDA `SourceModule`, a CuPy `RawKernel` or a torch `load_inline` script.

Nothing here is copied from an evaluation file: the kinds are those of any CUDA primer (map,
zip, saxpy, fill, copy, matrix add and product, transpose, reductions, dot product, histogram,
stencils, thread-id prints). Deterministic for a seed.

    python -m training.corpus.ordinary_kernels OUT_DIR [--count N] [--seed S]
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path


def pick(rng: random.Random, weighted: dict[str, float] | list[str]) -> str:
    if isinstance(weighted, dict):
        return rng.choices(list(weighted), weights=list(weighted.values()))[0]
    return rng.choice(weighted)


@dataclass
class Voice:
    """One author's spelling, used throughout a file."""

    indent: str
    brace_newline: bool
    star_left: bool          # `float* a` rather than `float *a`
    compact: float           # chance an expression drops the spaces around * and +
    index_decl: str          # `int`, `const int`, `unsigned int`, ...
    index: str               # the element index's name
    count: str               # the element count's name
    literal_f: bool          # 2.0f rather than 2.0 for float constants
    restrict: bool
    const_in: bool
    bounds: str              # block | line | return | none | stride
    rng: random.Random = field(repr=False, default_factory=random.Random)

    def ptr(self, ctype: str, name: str, const: bool = False) -> str:
        c = "const " if const and self.const_in else ""
        star = f"{ctype}* " if self.star_left else f"{ctype} *"
        r = "__restrict__ " if self.restrict and const else ""
        return f"{c}{star}{r}{name}"

    def op(self, a: str, sym: str, b: str) -> str:
        return f"{a}{sym}{b}" if self.rng.random() < self.compact else f"{a} {sym} {b}"

    def lit(self, value: str, ctype: str) -> str:
        if ctype == "float" and "." in value:
            return value + "f" if self.literal_f else value
        if ctype in ("float", "double") and "." not in value and self.rng.random() < 0.5:
            return value + (".0f" if self.literal_f and ctype == "float" else ".0")
        return value


ONE_D = {
    "{b}.x * {d}.x + {t}.x": 5, "{d}.x * {b}.x + {t}.x": 3, "{t}.x + {b}.x * {d}.x": 3,
    "{t}.x + {d}.x * {b}.x": 1, "({b}.x * {d}.x) + {t}.x": 1,
}


def index_1d(v: Voice) -> str:
    form = pick(v.rng, ONE_D).format(b="blockIdx", d="blockDim", t="threadIdx")
    if v.rng.random() < v.compact:
        form = form.replace(" * ", "*")
        if v.rng.random() < 0.5:
            form = form.replace(" + ", "+")
    return form


def index_flat_2d(v: Voice, width: str) -> str:
    return pick(v.rng, {f"threadIdx.x + threadIdx.y * {width}": 2, f"threadIdx.y * {width} + threadIdx.x": 2,
                        f"threadIdx.x + {width} * threadIdx.y": 1})


# Unary maps: (names a kernel doing it is given, expression of {x}); float unless noted.
UNARY = [
    (["square", "square_kernel", "squareArray", "sq"], "{x} * {x}"),
    (["cube", "cube_kernel"], "{x} * {x} * {x}"),
    (["relu", "relu_kernel", "apply_relu", "reluKernel"], "fmaxf({x}, 0.0f)"),
    (["relu", "relu_forward"], "{x} > 0 ? {x} : 0"),
    (["sigmoid", "sigmoid_kernel", "sigmoidKernel"], "1.0f / (1.0f + expf(-{x}))"),
    (["tanh_kernel", "apply_tanh"], "tanhf({x})"),
    (["sin_kernel", "apply_sin", "sine", "vsin"], "sin({x})"),
    (["cos_kernel", "cosine", "vcos"], "cos({x})"),
    (["exp_kernel", "expKernel", "vexp"], "exp({x})"),
    (["log_kernel", "logKernel", "vlog"], "log({x})"),
    (["sqrt_kernel", "sqrtKernel", "square_root"], "sqrt({x})"),
    (["abs_kernel", "absolute", "vabs"], "fabs({x})"),
    (["negate", "neg", "negative"], "-{x}"),
    (["reciprocal", "inverse"], "1.0f / {x}"),
    (["add_one", "increment", "plus_one", "inc"], "{x} + 1"),
    (["double_it", "times_two", "twice", "double_elements"], "{x} * 2"),
    (["halve", "half_it", "divide_by_two"], "{x} / 2"),
    (["clamp01", "saturate", "clip"], "fminf(fmaxf({x}, 0.0f), 1.0f)"),
    (["step", "threshold"], "{x} > 0.5f ? 1.0f : 0.0f"),
]

# Compound in-place updates: (names, operator, operand).
COMPOUND = [
    (["double_array", "times2", "mul2", "double_values"], "*=", "2"),
    (["halve", "div2", "half_array"], "/=", "2"),
    (["add_ten", "plus10"], "+=", "10"),
    (["increment", "inc_kernel", "add_one"], "+=", "1"),
    (["decrement", "dec_kernel"], "-=", "1"),
    (["triple", "times3"], "*=", "3"),
]

# Binary maps: (names, operator or format).
BINARY = [
    (["add", "vector_add", "vecAdd", "VecAdd", "add_vectors", "addKernel", "sum_arrays", "add_them", "vadd"], "{a} + {b}"),
    (["multiply", "vecMul", "elementwise_mul", "mul_kernel", "hadamard", "vmul", "multiplyKernel"],
     "{a} * {b}"),
    (["subtract", "vector_sub", "vecSub", "sub_kernel", "diff", "subtract_them"], "{a} - {b}"),
    (["divide", "vecDiv", "div_kernel", "divide_them"], "{a} / {b}"),
    (["maximum", "vmax", "max_kernel", "elementwise_max"], "fmaxf({a}, {b})"),
    (["minimum", "vmin", "min_kernel"], "fminf({a}, {b})"),
    (["squared_diff", "sqdiff"], "({a} - {b}) * ({a} - {b})"),
    (["average", "mean2", "avg"], "({a} + {b}) / 2"),
]

ARRAYS_IN = [("a", "b"), ("x", "y"), ("A", "B"), ("in1", "in2"), ("d_a", "d_b"), ("lhs", "rhs"), ("u", "v"),
             ("input1", "input2"), ("src1", "src2"), ("left", "right")]
ARRAYS_OUT = ["c", "out", "dest", "dst", "result", "C", "res", "d_c", "output", "z", "r", "o"]
ARRAY_ONE = ["a", "x", "data", "arr", "d", "in", "input", "src", "vec", "d_in", "values", "buf"]
OUT_ONE = ["out", "y", "b", "dest", "dst", "output", "result", "d_out", "res"]
INDEX_NAMES = {"i": 8, "idx": 6, "tid": 5, "index": 4, "id": 2, "gid": 2, "k": 1, "thread_id": 1, "gtid": 1,
               "globalIdx": 1, "pos": 1, "thread_idx": 1, "j": 1}
COUNTS = {"n": 8, "N": 5, "size": 3, "len": 2, "count": 2, "numElements": 2, "length": 1, "num": 1, "nelem": 1,
          "n_elements": 1, "total": 1}
DECLS = {"int": 10, "const int": 5, "unsigned int": 3, "int const": 1, "size_t": 1, "unsigned": 1,
         "const unsigned int": 1, "auto": 1, "long": 1}


def random_voice(rng: random.Random) -> Voice:
    return Voice(
        indent=pick(rng, {"    ": 6, "  ": 3, "\t": 2, "   ": 1, "        ": 1}),
        brace_newline=rng.random() < 0.35,
        star_left=rng.random() < 0.5,
        compact=float(pick(rng, {"0": 6, "0.3": 2, "0.8": 2})),
        index_decl=pick(rng, DECLS),
        index=pick(rng, INDEX_NAMES),
        count=pick(rng, COUNTS),
        literal_f=rng.random() < 0.6,
        restrict=rng.random() < 0.15,
        const_in=rng.random() < 0.45,
        bounds=pick(rng, {"block": 6, "line": 4, "return": 2, "none": 3, "stride": 1}),
        rng=rng,
    )


def param_name(decl: str) -> str:
    """`const float *__restrict__ x` -> `x`."""
    return decl.split()[-1].lstrip("*")


def element_type(decl: str) -> str:
    """`const float *__restrict__ x` -> `float`."""
    return decl.replace("const ", "").replace("__restrict__ ", "").split("*")[0].strip()


@dataclass
class Kernel:
    name: str
    params: list[str]          # declarations as written
    body: list[tuple[int, str]]  # (depth, line)
    dims: int = 1              # 1: a launch over count elements; 2: over a rows x cols grid
    count: str | None = None   # the element count parameter's name (None: launched exactly)
    args: list[str] = field(default_factory=list)   # names, for the host launch
    threads: str | None = None   # the shared array's size (a number or a macro), for reductions


def guarded(v: Voice, work: list[str], index_expr: str | None = None, has_count: bool = True) -> list[tuple[int, str]]:
    """The index declaration, the bounds check and `work` (statements of the element index)."""
    i, n = v.index, v.count
    if index_expr is None and not has_count and v.rng.random() < 0.5:
        index_expr = "threadIdx.x"      # one block, launched with exactly as many threads as elements
    expr = index_expr or index_1d(v)
    decl = "int" if v.index_decl == "auto" and "threadIdx" not in expr else v.index_decl
    lines = []
    bounds = v.bounds if has_count else "none"
    if bounds == "stride":
        step = v.op("blockDim.x", "*", "gridDim.x")
        lines.append((0, f"for (int {i} = {expr}; {i} < {n}; {i} += {step}) {{"))
        lines += [(1, w) for w in work]
        lines.append((0, "}"))
        return lines
    lines.append((0, f"{decl} {i} = {expr};"))
    if bounds == "block":
        lines.append((0, f"if ({i} < {n}) {{"))
        lines += [(1, w) for w in work]
        lines.append((0, "}"))
    elif bounds == "line" and len(work) == 1:
        if v.rng.random() < 0.5:
            lines.append((0, f"if ({i} < {n}) {work[0]}"))
        else:
            lines += [(0, f"if ({i} < {n})"), (1, work[0])]
    elif bounds in ("return", "line"):
        lines.append((0, f"if ({i} >= {n}) return;"))
        lines += [(0, w) for w in work]
    else:
        lines += [(0, w) for w in work]
    return lines


def ctype_of(rng: random.Random) -> str:
    return pick(rng, {"float": 8, "double": 2, "int": 1})


def fix_type(expr: str, ctype: str) -> str:
    """A float expression written for another element type."""
    if ctype == "float":
        return expr
    if ctype == "double":
        for f in ("fmaxf", "fminf", "expf", "tanhf"):
            expr = expr.replace(f, f[:-1])
        return expr.replace(".0f", ".0").replace("5f", "5")
    return expr


def unary(v: Voice) -> Kernel:
    rng = v.rng
    names, expr = rng.choice(UNARY)
    ctype = "float" if "f(" in expr or "f " in expr or "0f" in expr else ctype_of(rng)
    if ctype == "int" and any(f in expr for f in ("sin", "cos", "exp", "log", "sqrt", "fabs", "1.0f")):
        ctype = "float"
    expr = fix_type(expr, ctype)
    for k in ("2", "1"):
        if expr.endswith(f" {k}") and ctype != "int":
            expr = expr[:-1] + v.lit(k, ctype)
    name = pick(rng, names) if rng.random() < 0.8 else pick(rng, ["kernel", "my_kernel", "f", "func", "k", "compute"])
    i, n = v.index, v.count
    has_count = rng.random() < 0.75
    if rng.random() < 0.35:   # in place
        a = pick(rng, ARRAY_ONE)
        work = [f"{a}[{i}] = {expr.format(x=f'{a}[{i}]')};"]
        params = [v.ptr(ctype, a)]
        args = [a]
    else:
        a, o = pick(rng, ARRAY_ONE), pick(rng, OUT_ONE)
        if a == o:
            o = "out" if a != "out" else "y"
        if rng.random() < 0.3:
            t = pick(rng, ["v", "val", "t", "xi", "value"])
            work = [f"{ctype} {t} = {a}[{i}];", f"{o}[{i}] = {expr.format(x=t)};"]
        else:
            work = [f"{o}[{i}] = {expr.format(x=f'{a}[{i}]')};"]
        params = [v.ptr(ctype, o), v.ptr(ctype, a, const=True)] if rng.random() < 0.5 else \
            [v.ptr(ctype, a, const=True), v.ptr(ctype, o)]
        args = [param_name(p) for p in params]
    if has_count:
        params.append(f"int {n}")
        args.append(n)
    return Kernel(name, params, guarded(v, work, has_count=has_count), count=n if has_count else None, args=args)


def compound(v: Voice) -> Kernel:
    rng = v.rng
    names, op, operand = rng.choice(COMPOUND)
    ctype = ctype_of(rng)
    a = pick(rng, ARRAY_ONE)
    i, n = v.index, v.count
    value = v.lit(operand, ctype) if rng.random() < 0.5 else operand
    if rng.random() < 0.4:
        work = [f"{a}[{i}] = {v.op(f'{a}[{i}]', op[0], value)};"]
    else:
        work = [f"{a}[{i}] {op} {value};"]
    has_count = rng.random() < 0.6
    params = [v.ptr(ctype, a)] + ([f"int {n}"] if has_count else [])
    expr = index_flat_2d(v, pick(rng, ["4", "blockDim.x", "8", "16"])) if rng.random() < 0.3 else None
    name = pick(rng, names) if rng.random() < 0.8 else pick(rng, ["kernel", "my_kernel", "func", "update"])
    return Kernel(name, params, guarded(v, work, expr, has_count), count=n if has_count else None,
                  args=[a] + ([n] if has_count else []))


def binary(v: Voice) -> Kernel:
    rng = v.rng
    names, form = rng.choice(BINARY)
    ctype = "float" if "fmaxf" in form or "fminf" in form else ctype_of(rng)
    if ctype == "int" and "/" in form:
        ctype = "float"
    form = fix_type(form, ctype)
    (a, b), c = rng.choice(ARRAYS_IN), pick(rng, ARRAYS_OUT)
    if c in (a, b):
        c = "out"
    i, n = v.index, v.count
    expr = form.format(a=f"{a}[{i}]", b=f"{b}[{i}]")
    if "/ 2" in expr and ctype != "int":
        expr = expr.replace("/ 2", "/ " + v.lit("2.0", ctype))
    if rng.random() < 0.15 and "+" in form and form.count("{a}") == 1:
        work = [f"{c}[{i}] += {b}[{i}];"] if rng.random() < 0.5 else [f"{a}[{i}] += {b}[{i}];"]
    else:
        work = [f"{c}[{i}] = {expr};"]
    has_count = rng.random() < 0.8
    order = rng.random()
    if order < 0.5:
        params = [v.ptr(ctype, c), v.ptr(ctype, a, True), v.ptr(ctype, b, True)]
    else:
        params = [v.ptr(ctype, a, True), v.ptr(ctype, b, True), v.ptr(ctype, c)]
    if has_count:
        params.append(f"{pick(rng, {'int': 5, 'const int': 1, 'unsigned int': 1, 'size_t': 1})} {n}")
    name = pick(rng, names) if rng.random() < 0.85 else pick(rng, ["kernel", "my_kernel", "f", "func"])
    return Kernel(name, params, guarded(v, work, has_count=has_count), count=n if has_count else None,
                  args=[param_name(p) for p in params])


def scalar(v: Voice) -> Kernel:
    """saxpy, scaling, adding a constant, axpby, fill, iota, copy, normalization."""
    rng = v.rng
    i, n = v.index, v.count
    kind = pick(rng, {"saxpy": 4, "scale": 3, "shift": 1, "axpby": 1, "fill": 2, "iota": 1, "copy": 2,
                      "normalize": 1, "invert": 1, "lerp": 1})
    ctype = "double" if kind in ("saxpy", "scale") and rng.random() < 0.15 else "float"
    P = lambda name, const=False: v.ptr(ctype, name, const)   # noqa: E731
    if kind == "saxpy":
        a = pick(rng, {"a": 5, "alpha": 3, "s": 1})
        x, y = pick(rng, {"x": 6, "X": 1, "d_x": 1}), None
        y = {"x": "y", "X": "Y", "d_x": "d_y"}[x]
        form = pick(rng, {"{a} * {x}[{i}] + {y}[{i}]": 6, "{a}*{x}[{i}] + {y}[{i}]": 2, "{y}[{i}] + {a} * {x}[{i}]": 1})
        work = [f"{y}[{i}] = {form.format(a=a, x=x, y=y, i=i)};"]
        params = [f"int {n}", f"{ctype} {a}", P(x, True), P(y)] if rng.random() < 0.6 else \
            [f"{ctype} {a}", P(x, True), P(y), f"int {n}"]
        name = pick(rng, {"saxpy": 6, "daxpy" if ctype == "double" else "saxpy_kernel": 2, "axpy": 2, "saxpyKernel": 1})
    elif kind == "axpby":
        work = [f"y[{i}] = alpha * x[{i}] + beta * y[{i}];"]
        params = [f"{ctype} alpha", P("x", True), f"{ctype} beta", P("y"), f"int {n}"]
        name = pick(rng, ["axpby", "saxpby", "linear_comb"])
    elif kind in ("scale", "shift"):
        a, o = pick(rng, ARRAY_ONE), pick(rng, OUT_ONE)
        if a == o:
            o = "out"
        s = pick(rng, {"scale": 3, "factor": 2, "s": 1, "alpha": 1, "k": 1} if kind == "scale"
                 else {"offset": 2, "value": 2, "c": 1, "bias": 1})
        sym = "*" if kind == "scale" else "+"
        if rng.random() < 0.4:
            work = [f"{a}[{i}] {sym}= {s};"]
            params = [P(a), f"{ctype} {s}"]
        else:
            work = [f"{o}[{i}] = {a}[{i}] {sym} {s};" if rng.random() < 0.7 else f"{o}[{i}] = {s} {sym} {a}[{i}];"]
            params = [P(a, True), P(o), f"{ctype} {s}"]
        params.append(f"int {n}")
        name = pick(rng, ["scale", "scale_array", "scaleKernel", "mul_scalar", "vec_scale"] if kind == "scale"
                    else ["add_scalar", "shift", "addConstant", "offset_kernel"])
    elif kind == "fill":
        a = pick(rng, ARRAY_ONE)
        val = pick(rng, ["value", "val", "v", "c"])
        work = [f"{a}[{i}] = {val};"] if rng.random() < 0.6 else [f"{a}[{i}] = {v.lit(pick(rng, ['0', '1', '0.0']), ctype)};"]
        params = [P(a)] + ([f"{ctype} {val}"] if val in work[0] else []) + [f"int {n}"]
        name = pick(rng, ["fill", "fill_kernel", "set_value", "init", "initialize", "memset_kernel", "zero"])
    elif kind == "iota":
        a = pick(rng, ARRAY_ONE)
        work = [f"{a}[{i}] = {i};"]
        params = [P(a), f"int {n}"]
        name = pick(rng, ["iota", "arange", "fill_index", "init_index"])
    elif kind == "copy":
        s, d = rng.choice([("src", "dst"), ("in", "out"), ("a", "b"), ("input", "output"), ("x", "y")])
        work = [f"{d}[{i}] = {s}[{i}];"]
        params = [P(d), P(s, True), f"int {n}"] if rng.random() < 0.5 else [P(s, True), P(d), f"int {n}"]
        name = pick(rng, ["copy", "copy_kernel", "copyArray", "memcpy_kernel", "copy_data"])
    elif kind == "normalize":
        a = pick(rng, ARRAY_ONE)
        lo, span = rng.choice([("lo", "range"), ("min_v", "scale"), ("mn", "width"), ("offset", "norm")])
        work = [f"{a}[{i}] = ({a}[{i}] - {lo}) / {span};"]
        params = [P(a), f"{ctype} {lo}", f"{ctype} {span}", f"int {n}"]
        name = pick(rng, ["normalize", "rescale", "norm_kernel", "func"])
    elif kind == "invert":
        ctype = "unsigned char"
        s, d = rng.choice([("img", "out"), ("in", "out"), ("src", "dst"), ("pixels", "result")])
        work = [f"{d}[{i}] = 255 - {s}[{i}];"]
        params = [v.ptr(ctype, d), v.ptr(ctype, s, True), f"int {n}"]
        name = pick(rng, ["invert", "invert_image", "negative", "invertKernel"])
    else:
        work = [f"out[{i}] = a[{i}] + t * (b[{i}] - a[{i}]);"]
        params = [P("a", True), P("b", True), P("out"), f"{ctype} t", f"int {n}"]
        name = pick(rng, ["lerp", "interpolate", "mix"])
    return Kernel(name, params, guarded(v, work), count=n, args=[param_name(p) for p in params])


def matrix(v: Voice) -> Kernel:
    """2D: element-wise matrix ops, transpose, naive product."""
    rng = v.rng
    row, col = rng.choice([("row", "col"), ("r", "c"), ("y", "x"), ("i", "j"), ("iy", "ix")])
    rows, cols = rng.choice([("rows", "cols"), ("M", "N"), ("height", "width"), ("ny", "nx"), ("h", "w")])
    decl = "int" if v.index_decl in ("auto", "size_t", "long") else v.index_decl
    ydecl = f"{decl} {row} = {pick(rng, {'blockIdx.y * blockDim.y + threadIdx.y': 4, 'blockDim.y * blockIdx.y + threadIdx.y': 2, 'threadIdx.y + blockIdx.y * blockDim.y': 2})};"
    xdecl = f"{decl} {col} = {pick(rng, {'blockIdx.x * blockDim.x + threadIdx.x': 4, 'blockDim.x * blockIdx.x + threadIdx.x': 2, 'threadIdx.x + blockIdx.x * blockDim.x': 2})};"
    head = [(0, xdecl), (0, ydecl)] if rng.random() < 0.5 else [(0, ydecl), (0, xdecl)]
    kind = pick(rng, {"add": 3, "scale": 1, "transpose": 2, "matmul": 3, "copy": 1})
    ctype = "float" if rng.random() < 0.85 else "double"
    P = lambda name, const=False: v.ptr(ctype, name, const)   # noqa: E731
    at = lambda r, c, w: f"{r} * {w} + {c}" if rng.random() < 0.8 else f"{c} + {r} * {w}"   # noqa: E731
    cond = f"if ({row} < {rows} && {col} < {cols})"
    if kind == "matmul":
        n = rng.choice(["n", "N", "K", "width"])
        rows = cols = n
        cond = f"if ({row} < {n} && {col} < {n})"
        A, B, C = rng.choice([("A", "B", "C"), ("a", "b", "c"), ("M", "N", "P"), ("d_A", "d_B", "d_C")])
        s, k = rng.choice([("sum", "k"), ("acc", "k"), ("tmp", "e"), ("value", "i"), ("Pvalue", "k")])
        if k in (row, col):
            k = "kk"
        body = [(0, f"{ctype} {s} = 0;") if rng.random() < 0.5 else (0, f"{ctype} {s} = {v.lit('0.0', ctype)};"),
                (0, f"for (int {k} = 0; {k} < {n}; {'++' + k if rng.random() < 0.4 else k + '++'}) {{"),
                (1, f"{s} += {A}[{row} * {n} + {k}] * {B}[{k} * {n} + {col}];"), (0, "}"),
                (0, f"{C}[{row} * {n} + {col}] = {s};")]
        params = [P(A, True), P(B, True), P(C), f"int {n}"]
        name = pick(rng, ["matmul", "matrixMul", "MatMul", "matrix_multiply", "mm_kernel", "gemm_naive", "MatrixMulKernel"])
        inner = head + [(0, cond + " {")] + [(d + 1, t) for d, t in body] + [(0, "}")]
        return Kernel(name, params, inner, dims=2, count=n, args=[A, B, C, n])
    if kind == "transpose":
        i, o = rng.choice([("in", "out"), ("idata", "odata"), ("A", "At"), ("src", "dst")])
        work = f"{o}[{at(col, row, rows)}] = {i}[{at(row, col, cols)}];"
        params = [P(o), P(i, True), f"int {rows}", f"int {cols}"] if rng.random() < 0.5 else [P(i, True), P(o), f"int {rows}", f"int {cols}"]
        name = pick(rng, ["transpose", "transposeNaive", "transpose_kernel", "matrix_transpose"])
    else:
        A, B, C = rng.choice([("A", "B", "C"), ("a", "b", "c"), ("mat1", "mat2", "out")])
        idx = at(row, col, cols)
        if kind == "add":
            work = f"{C}[{idx}] = {A}[{idx}] + {B}[{idx}];"
            params = [P(A, True), P(B, True), P(C), f"int {rows}", f"int {cols}"]
            name = pick(rng, ["matAdd", "matrix_add", "MatAdd", "add_matrices", "matrixAdd"])
        elif kind == "scale":
            work = f"{C}[{idx}] = s * {A}[{idx}];"
            params = [P(A, True), P(C), f"{ctype} s", f"int {rows}", f"int {cols}"]
            name = pick(rng, ["matScale", "scale_matrix"])
        else:
            work = f"{C}[{idx}] = {A}[{idx}];"
            params = [P(A, True), P(C), f"int {rows}", f"int {cols}"]
            name = pick(rng, ["copy2d", "matrix_copy"])
    if rng.random() < 0.3:
        k = pick(rng, ["idx", "index", "id", "offset"])
        k = k if k not in (row, col) else "idx2"
        inner = head + [(0, cond + " {"), (1, f"int {k} = {at(row, col, cols)};"),
                        (1, work.replace(at(row, col, cols), k) if at(row, col, cols) in work else work), (0, "}")]
    else:
        inner = head + [(0, cond + " {"), (1, work), (0, "}")]
    return Kernel(name, params, inner, dims=2, count=rows, args=[param_name(p) for p in params])


def reduction(v: Voice) -> Kernel:
    """Shared-memory block sum, dot product (CUDA by Example's `cache`), atomic sum."""
    rng = v.rng
    n = v.count
    kind = pick(rng, {"block_sum": 3, "dot": 2, "atomic": 2})
    threads = pick(rng, ["256", "THREADS", "BLOCK_SIZE", "threadsPerBlock", "512", "128"])
    sh, t, s = rng.choice([("sdata", "tid", "s"), ("cache", "cacheIndex", "i"), ("partial", "t", "stride"),
                           ("smem", "lane", "offset"), ("shared", "tx", "step")])
    gi = "gid" if t != "gid" else "g"
    body = []
    if kind == "atomic":
        i = v.index
        work = [f"atomicAdd({pick(rng, ['sum', 'result', 'total', 'out'])}, {pick(rng, ['x', 'a', 'data', 'in'])}[{i}]);"]
        src = work[0].split("(")[1].split(",")[0]
        arr = work[0].split(", ")[1].split("[")[0]
        params = [f"{v.ptr('float', arr, True)}", v.ptr("float", src), f"int {n}"]
        return Kernel(pick(rng, ["sum_atomic", "atomic_sum", "reduce_atomic", "sumKernel"]), params,
                      guarded(v, work), count=n, args=[arr, src, n])
    decl = f"__shared__ float {sh}[{threads}];"
    if kind == "block_sum":
        x, o = rng.choice([("in", "out"), ("g_idata", "g_odata"), ("input", "output"), ("x", "partial_sums")])
        body += [(0, decl), (0, f"unsigned int {t} = threadIdx.x;"),
                 (0, f"unsigned int {gi} = {index_1d(v)};"),
                 (0, f"{sh}[{t}] = ({gi} < {n}) ? {x}[{gi}] : 0;" if rng.random() < 0.6 else f"{sh}[{t}] = {x}[{gi}];"),
                 (0, "__syncthreads();"),
                 (0, f"for (unsigned int {s} = blockDim.x / 2; {s} > 0; {s} >>= 1) {{"),
                 (1, f"if ({t} < {s}) {{"), (2, f"{sh}[{t}] += {sh}[{t} + {s}];"), (1, "}"),
                 (1, "__syncthreads();"), (0, "}"),
                 (0, f"if ({t} == 0) {o}[blockIdx.x] = {sh}[0];")]
        params = [v.ptr("float", x, True), v.ptr("float", o), f"int {n}"]
        name = pick(rng, ["reduce", "reduce_sum", "sum_reduction", "reduce0", "block_sum", "reduction"])
        args = [x, o, n]
    else:
        a, b, c = rng.choice([("a", "b", "c"), ("x", "y", "partial"), ("v1", "v2", "out")])
        tmp = pick(rng, ["temp", "sum", "acc"])
        body += [(0, decl), (0, f"int {gi} = {index_1d(v)};"), (0, f"int {t} = threadIdx.x;"),
                 (0, f"float {tmp} = 0;"),
                 (0, f"while ({gi} < {n}) {{"), (1, f"{tmp} += {a}[{gi}] * {b}[{gi}];"),
                 (1, f"{gi} += blockDim.x * gridDim.x;"), (0, "}"),
                 (0, f"{sh}[{t}] = {tmp};"), (0, "__syncthreads();"),
                 (0, f"int {s} = blockDim.x / 2;"), (0, f"while ({s} != 0) {{"),
                 (1, f"if ({t} < {s}) {sh}[{t}] += {sh}[{t} + {s}];"), (1, "__syncthreads();"),
                 (1, f"{s} /= 2;"), (0, "}"), (0, f"if ({t} == 0) {c}[blockIdx.x] = {sh}[0];")]
        params = [v.ptr("float", a, True), v.ptr("float", b, True), v.ptr("float", c), f"int {n}"]
        name = pick(rng, ["dot", "dot_product", "dotProduct", "dot_kernel"])
        args = [a, b, c, n]
    return Kernel(name, params, body, count=n, args=args, threads=threads)


def misc(v: Voice) -> Kernel:
    """Thread-id prints, histograms, 1D stencils and convolutions."""
    rng = v.rng
    i, n = v.index, v.count
    kind = pick(rng, {"print": 2, "hist": 2, "stencil": 2, "conv": 1, "count": 1})
    if kind == "print":
        fmt = rng.choice([
            ('"Hello from thread %d\\n"', "threadIdx.x"),
            ('"block %d thread %d\\n"', "blockIdx.x, threadIdx.x"),
            ('"Thread (%d, %d)\\n"', "threadIdx.x, threadIdx.y"),
            ('"thread %d of block %d\\n"', "threadIdx.x, blockIdx.x"),
            ('"Hello World from GPU! block %d\\n"', "blockIdx.x"),
        ])
        body = [(0, f"printf({fmt[0]}, {fmt[1]});")]
        if rng.random() < 0.4:
            body = [(0, f"{v.index_decl if v.index_decl != 'auto' else 'int'} {i} = {index_1d(v)};"),
                    (0, f'printf("global index %d\\n", {i});')]
        return Kernel(pick(rng, ["hello", "hello_kernel", "helloFromGPU", "print_ids", "kernel"]), [],
                      body, count=None, args=[])
    if kind == "hist":
        d, h = rng.choice([("data", "hist"), ("input", "bins"), ("in", "histo"), ("values", "counts")])
        dtype = pick(rng, ["unsigned char", "int", "unsigned int"])
        work = [f"atomicAdd(&{h}[{d}[{i}]], 1);"]
        params = [v.ptr(dtype, d, True), v.ptr("unsigned int" if dtype != "int" else "int", h), f"int {n}"]
        return Kernel(pick(rng, ["histogram", "hist_kernel", "histo", "count_values"]), params, guarded(v, work),
                      count=n, args=[d, h, n])
    if kind == "count":
        d, c = pick(rng, ARRAY_ONE), pick(rng, ["count", "counter", "num_positive"])
        work = [f"if ({d}[{i}] > 0) atomicAdd({c}, 1);"]
        params = [v.ptr("float", d, True), v.ptr("int", c), f"int {n}"]
        return Kernel(pick(rng, ["count_positive", "countPositive"]), params, guarded(v, work), count=n,
                      args=[d, c, n])
    if kind == "stencil":
        a, o = rng.choice([("in", "out"), ("u", "u_new"), ("x", "y"), ("old", "next")])
        work = [f"{o}[{i}] = ({a}[{i} - 1] + {a}[{i}] + {a}[{i} + 1]) / {v.lit('3.0', 'float')};"
                if rng.random() < 0.6 else f"{o}[{i}] = {a}[{i}] + r * ({a}[{i} - 1] - 2 * {a}[{i}] + {a}[{i} + 1]);"]
        params = [v.ptr("float", a, True), v.ptr("float", o), f"int {n}"] + (["float r"] if "r *" in work[0] else [])
        expr = index_1d(v)
        return Kernel(pick(rng, ["stencil", "smooth", "blur1d", "diffusion", "heat_step", "average3"]), params,
                      [(0, f"int {i} = {expr};"), (0, f"if ({i} > 0 && {i} < {n} - 1) {{"), (1, work[0]), (0, "}")],
                      count=n, args=[param_name(p) for p in params])
    a, m, o = rng.choice([("in", "mask", "out"), ("input", "kernel", "output"), ("x", "w", "y"), ("signal", "filter", "result")])
    r, k = pick(rng, ["r", "radius", "half"]), pick(rng, ["j", "k", "m"])
    body = [(0, f"int {i} = {index_1d(v)};"), (0, f"if ({i} >= {n}) return;"), (0, "float sum = 0.0f;"),
            (0, f"for (int {k} = -{r}; {k} <= {r}; {k}++) {{"), (1, f"int p = {i} + {k};"),
            (1, f"if (p >= 0 && p < {n}) sum += {a}[p] * {m}[{k} + {r}];"), (0, "}"), (0, f"{o}[{i}] = sum;")]
    params = [v.ptr("float", a, True), v.ptr("float", m, True), v.ptr("float", o), f"int {n}", f"int {r}"]
    return Kernel(pick(rng, ["conv1d", "convolution_1d", "convolve"]), params, body, count=n, args=[a, m, o, n, r])


KINDS = {unary: 4, compound: 2, binary: 5, scalar: 5, matrix: 3, reduction: 2, misc: 2}


def render_kernel(v: Voice, k: Kernel, extern_c: bool) -> str:
    prefix = 'extern "C" ' if extern_c else ""
    sig = f"{prefix}__global__ void {k.name}({', '.join(k.params)})"
    opening = f"{sig}\n{{" if v.brace_newline else f"{sig} {{"
    lines = [opening] + [f"{v.indent * (d + 1)}{t}" for d, t in k.body] + ["}"]
    return "\n".join(lines) + "\n"


def host_main(v: Voice, k: Kernel, rng: random.Random) -> str:
    """A host program around one kernel: allocations, copies, the launch, the copy back."""
    ind = v.indent
    arrays = [p for p in k.params if "*" in p]
    scalars = [p for p in k.params if "*" not in p]
    size = pick(rng, ["1 << 20", "1024", "1000000", "4096", "256", "1 << 16"])
    lines = ["int main() {" if not v.brace_newline else "int main()\n{"]
    count = k.count or "N"
    is2d = k.dims == 2
    scalar_names = {p.split()[-1] for p in scalars}
    if count not in scalar_names or is2d:
        lines.append(f"{ind}const int {count} = {size if not is2d else pick(rng, ['512', '1024', '256'])};")
    for p in scalars:
        name = p.split()[-1]
        if name == count and not is2d:
            lines.append(f"{ind}int {name} = {size};")
        elif name != count:
            lines.append(f"{ind}{' '.join(p.split()[:-1]).replace('const ', '')} {name} = "
                         f"{'2.0f' if 'float' in p else '2.0' if 'double' in p else count};")
    total = count
    if is2d:
        other = [p.split()[-1] for p in scalars if p.split()[-1] != count]
        total = f"{count} * {other[0]}" if other and other[0] in ("cols", "N", "width", "nx", "w") else f"{count} * {count}"
    elem = element_type(arrays[0]) if arrays else "float"
    lines.append(f"{ind}size_t bytes = {total} * sizeof({elem});")
    for p in arrays:
        name, t = param_name(p), element_type(p)
        lines.append(f"{ind}{t} *h_{name} = ({t} *)malloc(bytes);")
    for p in arrays:
        name, t = param_name(p), element_type(p)
        lines.append(f"{ind}{t} *d_{name};")
        lines.append(f"{ind}cudaMalloc(&d_{name}, bytes);" if rng.random() < 0.6
                     else f"{ind}cudaMalloc((void **)&d_{name}, bytes);")
    for p in arrays:
        name = param_name(p)
        if "const" in p or rng.random() < 0.3:
            lines.append(f"{ind}cudaMemcpy(d_{name}, h_{name}, bytes, cudaMemcpyHostToDevice);")
    threads = k.threads
    if is2d:
        lines += [f"{ind}dim3 block(16, 16);",
                  f"{ind}dim3 grid(({count} + block.x - 1) / block.x, ({count} + block.y - 1) / block.y);"]
        launch = "grid, block"
    else:
        tname = pick(rng, ["threads", "blockSize", "threadsPerBlock", "block_size"])
        bname = pick(rng, ["blocks", "numBlocks", "gridSize", "blocksPerGrid"])
        lines.append(f"{ind}int {tname} = {threads if threads and threads.isdigit() else pick(rng, ['256', '128', '512'])};")
        lines.append(f"{ind}int {bname} = ({count} + {tname} - 1) / {tname};")
        launch = f"{bname}, {tname}"
    args = [f"d_{a}" if a in {param_name(p) for p in arrays} else a for a in k.args]
    lines.append(f"{ind}{k.name}<<<{launch}>>>({', '.join(args)});")
    lines.append(f"{ind}cudaDeviceSynchronize();")
    outs = [param_name(p) for p in arrays if "const" not in p]
    for name in outs[:1]:
        lines.append(f"{ind}cudaMemcpy(h_{name}, d_{name}, bytes, cudaMemcpyDeviceToHost);")
    for p in arrays:
        name = param_name(p)
        lines.append(f"{ind}cudaFree(d_{name});")
        lines.append(f"{ind}free(h_{name});")
    lines += [f"{ind}return 0;", "}"]
    return "\n".join(lines) + "\n"


def cuda_file(rng: random.Random, v: Voice, kernels: list[Kernel], host: bool) -> str:
    includes = pick(rng, {"#include <stdio.h>\n": 3, "#include <cuda_runtime.h>\n#include <stdio.h>\n": 3,
                          "#include <cstdio>\n#include <cuda_runtime.h>\n": 1, "": 1, "#include <math.h>\n": 1})
    if host:
        includes += "#include <stdlib.h>\n" if "stdlib" not in includes else ""
    defines = ""
    for k in kernels:
        if k.threads and not k.threads.isdigit():
            defines += f"#define {k.threads} 256\n"
    parts = [includes + defines]
    for k in kernels:
        comment = ""
        if rng.random() < 0.3:
            comment = pick(rng, [f"// {k.name.replace('_', ' ')} kernel\n", f"// kernel: {k.name}\n",
                                 "// one thread per element\n", "/* device code */\n"])
        parts.append(comment + render_kernel(v, k, extern_c=False))
    if host:
        parts.append(host_main(v, kernels[-1], rng))
    return "\n".join(p for p in parts if p)


def python_file(rng: random.Random, v: Voice, kernels: list[Kernel]) -> str:
    """The kernels as the CUDA string of a PyCUDA, CuPy or torch load_inline script."""
    how = pick(rng, {"pycuda": 3, "cupy": 2, "load_inline": 2})
    src = "\n".join(render_kernel(v, k, extern_c=how == "cupy") for k in kernels)
    if rng.random() < 0.5:   # indented in the string, as a SourceModule often is
        src = "\n".join(("    " + line) if line else line for line in src.split("\n"))
    k = kernels[0]
    quote = 'r"""' if how == "cupy" or rng.random() < 0.5 else '"""'
    if quote == '"""':
        src = src.replace("\\", "\\\\")   # printf's \n stays two characters in the CUDA text
    if how == "pycuda":
        mod = pick(rng, ["mod", "module", "kernels"])
        fn = pick(rng, [k.name, "func", "kernel", "f"])
        n_arr = len([p for p in k.params if "*" in p])
        args = ", ".join(f"drv.{'Out' if j == 0 else 'In'}({chr(97 + j)}_gpu)" for j in range(n_arr))
        return ("import numpy as np\nimport pycuda.autoinit\nimport pycuda.driver as drv\n"
                "from pycuda.compiler import SourceModule\n\n"
                f'{mod} = SourceModule({quote}\n{src}""")\n\n{fn} = {mod}.get_function("{k.name}")\n'
                f"n = {pick(rng, ['400', '1024', '256', '1000'])}\n"
                + "".join(f"{chr(97 + j)}_gpu = np.random.randn(n).astype(np.float32)\n" for j in range(n_arr))
                + f"{fn}({args}{', ' if args else ''}block=({pick(rng, ['400', '256', '32'])}, 1, 1), grid=(1, 1))\n")
    if how == "cupy":
        var = pick(rng, ["kernel", "ker", k.name + "_kernel", "raw"])
        return ("import cupy as cp\n\n"
                f"{var} = cp.RawKernel(r'''\n{src}''', '{k.name}')\n\n"
                f"n = {pick(rng, ['1 << 20', '4096', '100000'])}\n"
                "x = cp.arange(n, dtype=cp.float32)\ny = cp.zeros_like(x)\n"
                f"{var}(((n + 255) // 256,), (256,), (x, y, cp.int32(n)))\n")
    names = [kk.name for kk in kernels]
    return ("import torch\nfrom torch.utils.cpp_extension import load_inline\n\n"
            f'cuda_source = {quote}\n{src}"""\n\n'
            f'module = load_inline(name="{names[0]}_ext", cpp_sources="", cuda_sources=cuda_source, '
            f"functions={names!r}, verbose=False)\n")


DECLARED = re.compile(r"\b(?:int|unsigned|size_t|float|double|auto|long|char)\s+\*?\s*(\w+)\s*(?:=|\[|;)")


def well_named(k: Kernel) -> bool:
    """No two things of the kernel share a name (an array `c` and a column index `c`)."""
    params = [param_name(p) for p in k.params]
    local = [name for _, line in k.body for name in DECLARED.findall(line)]
    return len(set(params)) == len(params) and not set(params) & set(local) and k.name not in params + local


def generate_source(rng: random.Random, wrap: str | None = None, host: bool | None = None) -> str:
    """One file: one or two ordinary kernels in one voice, as CUDA (perhaps with a host main)
    or as the CUDA string of a Python script."""
    v = random_voice(rng)
    kernels: list[Kernel] = []
    wanted = pick(rng, {"1": 5, "2": 2, "3": 1})
    while len(kernels) < int(wanted):
        k = rng.choices(list(KINDS), weights=list(KINDS.values()))[0](v)
        if well_named(k) and k.name not in {kk.name for kk in kernels}:
            kernels.append(k)
        v.index = pick(rng, INDEX_NAMES) if rng.random() < 0.3 else v.index
    wrap = wrap or pick(rng, {"cuda": 3, "python": 1})
    if wrap == "python":
        return python_file(rng, v, kernels)
    return cuda_file(rng, v, kernels, host if host is not None else rng.random() < 0.3)


def generate(out_dir: Path, count: int, seed: int) -> list[Path]:
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(count):
        text = generate_source(rng)
        path = out_dir / (f"ord_{k:05d}.py" if text.startswith("import") else f"ord_{k:05d}.cu")
        path.write_text(text)
        paths.append(path)
    return paths


def main() -> None:
    from training.corpus.generate_kernels import generator_main

    generator_main(__doc__.splitlines()[0], generate, count=1000, seed=2)


if __name__ == "__main__":
    main()
