"""The `// dice:` benchmark spec of a .cu document (docs/DESIGN.md, "What can be profiled").

    // dice: let n = 1 << 24                  bind a name (int or float expression)
    // dice: buffer x[n], y[n]                element counts of pointer parameters
    // dice: inout y                          an output that is also read
    // dice: launch grid=(n + 255) / 256, block=256, shared=0
    // dice: flops = 2 * n                    optional: floating-point operations per launch

`dice:` lines directly above a `__global__` function belong to it; lines before the first
kernel are shared by all (their buffers and inouts only by kernels with those pointer
parameters). Every value must fit in 64 bits. Errors are SpecError(line, column, message),
1-based, with what was expected.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field

from profiler.source.cuda_source import Kernel, find_kernels, parse
from profiler.source.dtypes import FLOAT_TYPES, INT_TYPES, dtype_name, itemsize

Number = int | float
Dim3 = tuple[int, int, int]

MAX_THREADS_PER_BLOCK = 1024
# CUDA's launch limits (every GPU since compute capability 3.0) and, for dynamic shared
# memory, the most a block may opt into on the largest (H100/H200: 227 KiB).
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_SHARED_BYTES = 227 * 1024
# The buffers of one kernel, baseline and candidate each allocate them on the device and keep a
# host copy of the outputs: a stated cap below the memory of the largest GPU (H200: 141 GB)
# rather than a `1 << 62` allocation that fails deep in the harness.
MAX_BUFFER_BYTES = 128 * 1024**3
# Every value is checked against 64 bits as it is computed, so that `1 << 100000000000` is a
# spec error at its operator instead of gigabytes of Python integer (a kernel parameter is
# at most 64 bits wide anyway).
VALUE_BITS = 64
MAX_LITERAL_DIGITS = 20  # 2**64 has 20 digits; longer literals cannot fit
# Parentheses and signs nest by recursion in the parser: bounded far below Python's limit.
MAX_NESTING = 64


class SpecError(ValueError):
    """A bad `dice:` line: where (1-based line and column) and what was expected."""

    def __init__(self, line: int, column: int, message: str):
        super().__init__(f"{line}:{column}: {message}")
        self.line = line
        self.column = column
        self.message = message


@dataclass
class Spec:
    """Everything needed to launch one kernel with made-up inputs."""

    kernel: str
    line: int  # 1-based line of the kernel's definition
    values: dict[str, Number]  # every `let`, evaluated
    buffers: dict[str, int]  # pointer parameter -> element count
    grid: Dim3
    block: Dim3
    shared: int = 0
    inout: frozenset[str] = frozenset()
    flops: float | None = None
    args: dict[str, Number] = field(default_factory=dict)  # scalar parameter -> value


# ---------------------------------------------------------------- expressions

_TOKEN = re.compile(r"\s*(?:(?P<number>\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?|\.\d+)"
                    r"|(?P<name>[A-Za-z_]\w*)|(?P<op><<|>>|[-+*/%()\[\],=]))")


@dataclass
class _Token:
    kind: str  # "number" | "name" | "op" | "end"
    text: str
    column: int  # 1-based in the document


class _Line:
    """Tokens of one `dice:` line and a recursive-descent parser over them."""

    def __init__(self, text: str, line: int, column: int):
        self.line = line
        self.tokens: list[_Token] = []
        pos = 0
        while pos < len(text):
            if not text[pos:].strip():
                break
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                bad = len(text[:pos]) + (len(text[pos:]) - len(text[pos:].lstrip()))
                raise SpecError(line, column + bad, f"expected a number, a name or an operator, got {text[bad]!r}")
            kind = match.lastgroup
            self.tokens.append(_Token(kind, match.group(kind), column + match.start(kind)))
            pos = match.end()
        end_column = column + len(text.rstrip())
        self.tokens.append(_Token("end", "", end_column))
        self.at = 0
        self.depth = 0

    def _nested(self, token: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise SpecError(self.line, token.column, f"expected an expression nested at most {MAX_NESTING} deep")

    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def error(self, expected: str, token: _Token | None = None) -> SpecError:
        token = token or self.peek()
        got = f", got {token.text!r}" if token.kind != "end" else ", got the end of the line"
        return SpecError(self.line, token.column, f"expected {expected}{got}")

    def expect(self, text: str) -> _Token:
        if self.peek().text != text:
            raise self.error(f"{text!r}")
        return self.take()

    def name(self, what: str = "a name") -> _Token:
        if self.peek().kind != "name":
            raise self.error(what)
        return self.take()

    def done(self) -> None:
        if self.peek().kind != "end":
            raise self.error("the end of the line")

    # expression := shift ; shift := sum (("<<"|">>") sum)* ; sum := term (("+"|"-") term)*
    # term := unary (("*"|"/"|"%") unary)* ; unary := ("-"|"+") unary | atom
    # atom := number | name | "(" expression ("," expression)* ")"   -- a tuple only in dims
    def expression(self, env: dict[str, Number], *, tuple_ok: bool = False):
        value = self._sum(env, tuple_ok)
        while self.peek().text in ("<<", ">>"):
            op = self.take()
            right = self._sum(env, False)
            value = _apply(op, value, right, self.line)
        return value

    def _sum(self, env, tuple_ok):
        value = self._term(env, tuple_ok)
        while self.peek().text in ("+", "-"):
            op = self.take()
            value = _apply(op, value, self._term(env, False), self.line)
        return value

    def _term(self, env, tuple_ok):
        value = self._unary(env, tuple_ok)
        while self.peek().text in ("*", "/", "%"):
            op = self.take()
            value = _apply(op, value, self._unary(env, False), self.line)
        return value

    def _unary(self, env, tuple_ok):
        if self.peek().text in ("-", "+"):
            op = self.take()
            self._nested(op)
            value = self._unary(env, False)
            self.depth -= 1
            _require_number(value, op, self.line)
            return _bounded(-value, op, self.line) if op.text == "-" else value
        return self._atom(env, tuple_ok)

    def _atom(self, env, tuple_ok):
        token = self.peek()
        if token.kind == "number":
            self.take()
            if any(c in token.text for c in ".eE"):
                return _bounded(float(token.text), token, self.line)
            if len(token.text) > MAX_LITERAL_DIGITS:
                raise SpecError(self.line, token.column, f"expected a number that fits in {VALUE_BITS} bits")
            return _bounded(int(token.text), token, self.line)
        if token.kind == "name":
            self.take()
            if token.text not in env:
                raise SpecError(self.line, token.column, f"expected a name bound by `let`, got {token.text!r}")
            return env[token.text]
        if token.text == "(":
            self.take()
            self._nested(token)
            items = [self.expression(env)]
            while self.peek().text == ",":
                comma = self.take()
                if not tuple_ok:
                    raise self.error("')' (a tuple is allowed only as a whole grid= or block=)", comma)
                items.append(self.expression(env))
            self.expect(")")
            self.depth -= 1
            return tuple(items) if len(items) > 1 else items[0]
        raise self.error("a number, a name or '('")


def _require_number(value, op: _Token, line: int) -> None:
    if isinstance(value, tuple):
        raise SpecError(line, op.column, f"expected numbers around {op.text!r}, got a tuple")


def _bounded(value: Number, at: _Token, line: int) -> Number:
    """The value, if it fits in VALUE_BITS (signed or not) and is finite; else a SpecError at `at`."""
    if isinstance(value, float):
        fits = math.isfinite(value) and abs(value) < 2.0**VALUE_BITS
    else:
        fits = -(1 << (VALUE_BITS - 1)) <= value < 1 << VALUE_BITS
    if not fits:
        raise SpecError(line, at.column, f"expected a value that fits in {VALUE_BITS} bits, got {_short(value)}")
    return value


def _short(value: Number) -> str:
    """A too-big value named without printing all its digits."""
    if isinstance(value, int) and abs(value) >= 1 << VALUE_BITS:
        return f"about 2**{value.bit_length() - 1}" if value > 0 else f"about -2**{value.bit_length() - 1}"
    return repr(value)


def _apply(op: _Token, left, right, line: int) -> Number:
    """One operation of C-like arithmetic, each operand and result within VALUE_BITS."""
    _require_number(left, op, line)
    _require_number(right, op, line)
    ints = isinstance(left, int) and isinstance(right, int)
    if op.text in ("<<", ">>", "%") and not ints:
        raise SpecError(line, op.column, f"expected integers around {op.text!r}")
    if op.text in ("/", "%") and right == 0:
        raise SpecError(line, op.column, "expected a divisor that is not zero")
    if op.text in ("<<", ">>") and not 0 <= right < VALUE_BITS:
        raise SpecError(line, op.column, f"expected a shift count from 0 to {VALUE_BITS - 1}, got {right}")
    return _bounded(_compute(op.text, left, right, ints), op, line)


def _compute(op: str, left: Number, right: Number, ints: bool) -> Number:
    """Operands are checked (within VALUE_BITS, shift counts below it), so this stays small."""
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if op in ("/", "%") and ints:
        # C semantics for integers (sizes are integers): the quotient truncates toward zero.
        quotient = abs(left) // abs(right) * (1 if (left >= 0) == (right >= 0) else -1)
        return quotient if op == "/" else left - right * quotient
    if op == "/":
        return left / right
    if op == "<<":
        return left << right
    return left >> right


# ---------------------------------------------------------------- directives

@dataclass
class _Directive:
    line: int  # 1-based
    column: int  # 1-based column of the text after "dice:"
    text: str


def _dice_directives(source: str) -> list[_Directive]:
    """Every `// dice:` comment, found by the parser (so one inside a string or a block
    comment is not a spec line)."""
    directives = []
    stack = [parse(source).root_node]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.children))
        if node.type != "comment":
            continue
        text = node.text.decode()
        match = re.match(r"//\s*dice:", text)
        if match is None:
            continue
        rest = text[match.end():]
        skipped = len(rest) - len(rest.lstrip())
        directives.append(_Directive(node.start_point.row + 1, node.start_point.column + match.end() + skipped + 1,
                                     rest.lstrip()))
    return sorted(directives, key=lambda d: d.line)


def _own_directives(directives: list[_Directive], kernel: Kernel, source_lines: list[str]) -> list[_Directive]:
    """The run of `dice:` lines (and other comment lines) directly above the kernel."""
    above = kernel.start[0]  # 0-based line of the definition = 1-based line just above it
    row = above
    while row >= 1 and source_lines[row - 1].lstrip().startswith("//"):
        row -= 1
    # `directives` is sorted by line: bisect, so that a file of thousands of kernels is not quadratic.
    first = bisect.bisect_right(directives, row, key=lambda d: d.line)
    return directives[first : bisect.bisect_right(directives, above, key=lambda d: d.line)]


def _dims(value, line: int, column: int, what: str) -> Dim3:
    items = value if isinstance(value, tuple) else (value,)
    if len(items) > 3 or not all(isinstance(v, int) and v >= 1 for v in items):
        raise SpecError(line, column, f"expected {what} as a positive integer or a tuple of up to 3, got {value!r}")
    return tuple(items) + (1,) * (3 - len(items))


@dataclass
class _Draft:
    values: dict[str, Number] = field(default_factory=dict)
    buffers: dict[str, tuple[int, _Directive, int]] = field(default_factory=dict)  # count, where, column
    inout: dict[str, tuple[_Directive, int]] = field(default_factory=dict)
    launch: tuple[Dim3, Dim3, int] | None = None
    flops: float | None = None


def _apply_directive(d: _Directive, draft: _Draft) -> None:
    p = _Line(d.text, d.line, d.column)
    word = p.name("one of let, buffer, inout, launch, flops")
    if word.text == "let":
        name = p.name("a name after `let`")
        p.expect("=")
        value = p.expression(draft.values)
        p.done()
        draft.values[name.text] = value
    elif word.text == "buffer":
        while True:
            name = p.name("a buffer name")
            p.expect("[")
            size_at = p.peek()
            count = p.expression(draft.values)
            if not isinstance(count, int) or count < 1:
                raise SpecError(d.line, size_at.column, f"expected a positive integer element count, got {count!r}")
            p.expect("]")
            draft.buffers[name.text] = (count, d, name.column)
            if p.peek().kind == "end":
                break
            p.expect(",")
    elif word.text == "inout":
        while True:
            name = p.name("a buffer name")
            draft.inout[name.text] = (d, name.column)
            if p.peek().kind == "end":
                break
            p.expect(",")
    elif word.text == "launch":
        found: dict[str, object] = {}
        while True:
            key = p.name("grid=, block= or shared=")
            if key.text not in ("grid", "block", "shared"):
                raise p.error("grid, block or shared", key)
            p.expect("=")
            at = p.peek()
            value = p.expression(draft.values, tuple_ok=key.text != "shared")
            if key.text == "shared":
                if not isinstance(value, int) or value < 0:
                    raise SpecError(d.line, at.column, f"expected shared= as bytes (an integer >= 0), got {value!r}")
                found["shared"] = value
            else:
                found[key.text] = _dims(value, d.line, at.column, f"{key.text}=")
            if p.peek().kind == "end":
                break
            p.expect(",")
        for required in ("grid", "block"):
            if required not in found:
                raise SpecError(d.line, d.column, f"expected {required}= in `launch`")
        block = found["block"]
        if block[0] * block[1] * block[2] > MAX_THREADS_PER_BLOCK:
            raise SpecError(d.line, d.column, f"expected at most {MAX_THREADS_PER_BLOCK} threads per block")
        for what, dims, limits in (("grid", found["grid"], MAX_GRID), ("block", block, MAX_BLOCK)):
            if any(v > limit for v, limit in zip(dims, limits)):
                raise SpecError(d.line, d.column, f"expected {what}= within CUDA's limits (x, y, z at most "
                                                  f"{', '.join(map(str, limits))}), got {dims}")
        if found.get("shared", 0) > MAX_SHARED_BYTES:
            raise SpecError(d.line, d.column, f"expected shared= at most {MAX_SHARED_BYTES} bytes (227 KiB, the most "
                                              f"a block can have), got {found['shared']}")
        draft.launch = (found["grid"], block, int(found.get("shared", 0)))
    elif word.text == "flops":
        p.expect("=")
        draft.flops = float(p.expression(draft.values))
        p.done()
    else:
        raise p.error("one of let, buffer, inout, launch, flops", word)


def _finish(kernel: Kernel, draft: _Draft, anchor: _Directive | None) -> Spec:
    """Check the draft against the kernel's parameters and build its Spec."""
    line, column = (anchor.line, anchor.column) if anchor else (kernel.start[0] + 1, kernel.start[1] + 1)
    for name, (_, where, col) in draft.buffers.items():
        param = kernel.param(name)
        if param is None or not param.pointer:
            raise SpecError(where.line, col, f"expected a pointer parameter of {kernel.name}, got {name!r}")
    for name, (where, col) in draft.inout.items():
        param = kernel.param(name)
        if param is None or not param.pointer or param.const:
            raise SpecError(where.line, col, f"expected a non-const pointer parameter of {kernel.name}, got {name!r}")
    if draft.launch is None:
        raise SpecError(line, column, f"expected a `launch grid=..., block=...` line for kernel {kernel.name}")
    args: dict[str, Number] = {}
    for param in kernel.params:
        if param.pointer:
            if param.name not in draft.buffers:
                raise SpecError(line, column, f"expected `buffer {param.name}[COUNT]` for pointer parameter {param.name}")
            continue
        if param.name not in draft.values:
            raise SpecError(line, column, f"expected `let {param.name} = ...` for parameter {param.name}")
        value = draft.values[param.name]
        if param.type in INT_TYPES and not isinstance(value, int):
            raise SpecError(line, column, f"expected an integer for {param.type} parameter {param.name}, got {value!r}")
        if param.type in INT_TYPES and not _fits(value, INT_TYPES[param.type]):
            low, high = _int_range(INT_TYPES[param.type])
            raise SpecError(line, column, f"expected {param.name} to fit its type {param.type} ({low} to {high}), "
                                          f"got {value}")
        if param.type not in INT_TYPES and param.type not in FLOAT_TYPES:
            raise SpecError(line, column, f"expected a scalar of a known type for {param.name}, got {param.type}")
        args[param.name] = value
    _check_buffer_bytes(kernel, draft)
    grid, block, shared = draft.launch
    return Spec(
        kernel=kernel.name,
        line=kernel.start[0] + 1,
        values=dict(draft.values),
        buffers={name: count for name, (count, _, _) in draft.buffers.items()},
        grid=grid,
        block=block,
        shared=shared,
        inout=frozenset(draft.inout),
        flops=draft.flops,
        args=args,
    )


def _int_range(dtype: str) -> tuple[int, int]:
    if dtype == "bool":
        return 0, 1
    bits = itemsize(dtype) * 8
    return (0, 2**bits - 1) if dtype.startswith("uint") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _fits(value: int, dtype: str) -> bool:
    low, high = _int_range(dtype)
    return low <= value <= high


def _check_buffer_bytes(kernel: Kernel, draft: _Draft) -> None:
    """The kernel's buffers together within MAX_BUFFER_BYTES, before anything is allocated."""
    total = 0
    for name, (count, where, col) in draft.buffers.items():
        param = kernel.param(name)
        dtype = dtype_name(param.type) if param is not None else None
        size = count * (itemsize(dtype) if dtype else 1)
        total += size
        if total > MAX_BUFFER_BYTES:
            raise SpecError(where.line, col, f"expected buffers of at most {MAX_BUFFER_BYTES // 1024**3} GiB in all "
                                             f"(more than a GPU holds), got {_gib(total)} with {name}[{count}]")


def _gib(count: int) -> str:
    return f"{count / 1024**3:.3g} GiB" if count < 1024**5 else f"about 2**{count.bit_length() - 1} bytes"


def _inherited(shared: _Draft, kernel: Kernel) -> _Draft:
    """What a later kernel takes from the leading lines: the values, the launch and flops, and
    the buffers and inouts that name its own pointer parameters. The leading lines are also
    the first kernel's own spec, so its `buffer x[n]` says nothing about a kernel without x."""
    def fits(name: str, writable: bool) -> bool:
        param = kernel.param(name)
        return param is not None and param.pointer and not (writable and param.const)

    return _Draft(shared.values, {n: b for n, b in shared.buffers.items() if fits(n, False)},
                  {n: i for n, i in shared.inout.items() if fits(n, True)}, shared.launch, shared.flops)


def parse_spec(source: str) -> dict[str, Spec]:
    """The spec of every kernel that has one. Kernels with `dice:` lines of their own must be
    complete (SpecError otherwise); a kernel that only inherits the shared lines gets a spec
    when those describe it fully."""
    kernels = find_kernels(source)
    directives = _dice_directives(source)
    if not kernels:
        if directives:
            raise SpecError(directives[0].line, directives[0].column, "expected a __global__ function below the spec")
        return {}
    source_lines = source.splitlines()
    first_row = kernels[0].start[0] + 1
    shared = [d for d in directives if d.line < first_row]
    shared_draft = _Draft()
    for d in shared:
        _apply_directive(d, shared_draft)
    specs: dict[str, Spec] = {}
    for kernel in kernels:
        first = kernel is kernels[0]
        own = [] if first else _own_directives(directives, kernel, source_lines)
        draft = shared_draft if first else _inherited(shared_draft, kernel)
        draft = _Draft(dict(draft.values), dict(draft.buffers), dict(draft.inout), draft.launch, draft.flops)
        for d in own:
            _apply_directive(d, draft)
        anchor = own[0] if own else (shared[0] if first and shared else None)
        if anchor is None and draft.launch is None:
            continue
        try:
            specs[kernel.name] = _finish(kernel, draft, anchor)
        except SpecError:
            if anchor is not None:
                raise
    return specs


def spec_lines(source: str) -> str:
    """Every `dice:` line of the document, one a line as `dice: TEXT`: what a measurement of any
    of its kernels may depend on besides the kernel's own text (a result cache's key)."""
    if "dice:" not in source:  # most keystrokes: no parse for a document without a spec
        return ""
    return "\n".join(f"dice: {d.text.rstrip()}" for d in _dice_directives(source))


# ---------------------------------------------------------------- template

def spec_template(source: str, kernel: str) -> str:
    """`// dice:` lines for the kernel, to insert above it: a size for every integer parameter,
    a value for every float one, a buffer for every pointer, and a launch. A kernel whose index
    arithmetic reads y or z (or checks its x index against a bound) gets the grid and block
    that cover the bounds it checks (profiler/source/launch_shape.py), its buffers the sizes
    their subscripts span; one that indexes an axis that cannot be read is a ValueError saying
    why (no launch rather than one that leaves an axis at 0). Any other kernel gets 256-thread
    blocks over its buffers. A starting point the user edits."""
    from profiler.source.cuda_source import find_kernel
    from profiler.source.launch_shape import launch_shape

    k = find_kernel(source, kernel)
    indent = " " * k.start[1]
    ints = [p.name for p in k.params if not p.pointer and p.type in INT_TYPES]
    floats = [p.name for p in k.params if not p.pointer and p.type not in INT_TYPES]
    pointers = [p.name for p in k.params if p.pointer]
    lines = source.splitlines()
    body = "\n".join(lines[k.body_start[0]:k.body_end[0] + 1])
    shape = launch_shape(body, source, ints, pointers)
    if shape is None:
        lines = _linear_template(ints, floats, pointers)
    else:
        lines = _shaped_template(shape, ints, floats, pointers)
    return "".join(f"{indent}// dice: {line}\n" for line in lines)


def _linear_template(ints: list[str], floats: list[str], pointers: list[str]) -> list[str]:
    lines = []
    # Sizes whose product is 2^24 elements: big enough to time, small enough for any GPU.
    if not ints:
        lines.append("let n = 1 << 24")
        size = "n"
    elif len(ints) == 1:
        lines.append(f"let {ints[0]} = 1 << 24")
        size = ints[0]
    else:
        lines += [f"let {ints[0]} = 4096", f"let {ints[1]} = 4096"] + [f"let {name} = 1" for name in ints[2:]]
        size = f"{ints[0]} * {ints[1]}"
    lines += [f"let {name} = 1.5" for name in floats]
    if pointers:
        lines.append("buffer " + ", ".join(f"{name}[{size}]" for name in pointers))
    grid_count = size if " " not in size else f"({size})"
    lines.append(f"launch grid=({grid_count} + 255) / 256, block=256")
    return lines


# Each size of a kernel's domain, by how many there are: 2^24 elements (1D, 4096^2, 256^3),
# big enough to time and small enough for any GPU. A kernel that also loops over a size (a
# matmul's K) does size^3 work: 1024 each keeps that near 2^30.
DOMAIN_SIZE = {1: "1 << 24", 2: "4096", 3: "256"}
LOOPED_SIZE = "1024"


def _shaped_template(shape, ints: list[str], floats: list[str], pointers: list[str]) -> list[str]:
    sizes = shape.dims + shape.loop_bounds
    value = LOOPED_SIZE if shape.loop_bounds else DOMAIN_SIZE.get(len(shape.dims), "16")
    lines = [f"let {name} = {value if name in sizes else 1}" for name in ints]
    lines += [f"let {name} = 1.5" for name in floats]
    if pointers:
        def count(name: str) -> str:
            dims = shape.buffer_dims.get(name) or sizes
            return " * ".join(dims) if dims else "1 << 20"
        lines.append("buffer " + ", ".join(f"{name}[{count(name)}]" for name in pointers))
    lines.append(f"launch {shape.launch()}")
    return lines
