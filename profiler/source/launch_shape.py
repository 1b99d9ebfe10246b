"""The launch a kernel's own index arithmetic asks for, read from its body.

A kernel that computes `x = blockIdx.x * blockDim.x + threadIdx.x` and
`y = blockIdx.y * blockDim.y + threadIdx.y` and checks `if (x < W && y < H)` covers a W x H
domain with a 2D grid: a 1D launch over W * H threads leaves y at 0 and times one row. This
module finds, per axis (x, y, z), the index variable, its step (`blockDim.a`, or a constant
such as a tile width: then the block is that wide), and the bound the kernel checks it
against, and from them the grid and block that cover the domain; and, per pointer, which
sizes its subscripts span, so that the buffers hold what the kernel reads.

It reads the text (comments and strings removed) with patterns for the common forms, not a
C++ semantics: what it cannot read it names in a `LaunchUnknown`, so the caller writes no
launch rather than a wrong one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

AXES = "xyz"
# Block shapes for an axis whose step is blockDim (free to choose): 256 threads a block.
FREE_BLOCK = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}
_INT_TYPE = r"(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:int|long\s+long|long|size_t|unsigned|int64_t|uint64_t|int32_t|uint32_t|auto)"
_DECLARATION = re.compile(rf"(?<![\w.]){_INT_TYPE}\s+(?=\w+\s*=)")
_CONSTANT = re.compile(rf"#\s*define\s+(\w+)\s+\(?\s*(\d+)\s*\)?\s*$|\b(?:static\s+)?(?:constexpr|const)\s+{_INT_TYPE}\s+(\w+)\s*=\s*(\d+)\s*;",
                       re.MULTILINE)
_BUILTIN = re.compile(r"\b(blockIdx|threadIdx|blockDim|gridDim)\.([xyz])\b")
_CAST = re.compile(rf"\(\s*{_INT_TYPE}\s*\)|static_cast<\s*{_INT_TYPE}\s*>")
_FOR = re.compile(rf"\bfor\s*\(\s*{_INT_TYPE}\s+(\w+)\s*=[^;]*;\s*(\w+)\s*(<=?)\s*([^;]+);")
_NAME = re.compile(r"[A-Za-z_]\w*")


class LaunchUnknown(ValueError):
    """The kernel's launch could not be read from its body; the message says why."""


@dataclass
class Axis:
    variable: str
    bound: str  # the expression the kernel checks the variable against (exclusive)
    block: int | None  # threads along the axis; None: free (the step is blockDim)
    per_block: bool = False  # the variable is blockIdx alone: one block per index


@dataclass
class LaunchShape:
    axes: dict[str, Axis]  # "x", "y", "z" -> what covers it
    dims: list[str]  # the kernel's parameters its bounds are made of, in order of first use
    loop_bounds: list[str]  # parameters a loop runs up to (a matmul's K)
    buffer_dims: dict[str, list[str]] = field(default_factory=dict)  # pointer -> sizes its subscripts span

    def block(self) -> tuple[int, ...]:
        used = [a for a in AXES if a in self.axes]
        # Threads spread over the axes indexed by threads; an axis of one block per index
        # (`r = blockIdx.y`) has one thread along it.
        threaded = [a for a in used if not self.axes[a].per_block]
        free = iter(FREE_BLOCK[max(1, len(threaded))])
        shape = []
        for a in AXES[: AXES.index(used[-1]) + 1]:
            axis = self.axes.get(a)
            if axis is None or axis.per_block:
                shape.append(1)
            elif axis.block is not None:
                shape.append(axis.block)
                next(free)
            else:
                shape.append(next(free))
        return tuple(shape)

    def launch(self) -> str:
        """`grid=..., block=...` in the spec's grammar: each covered axis ceil(bound / block)."""
        block = self.block()
        grid = []
        for a, threads in zip(AXES, block):
            axis = self.axes.get(a)
            if axis is None:
                grid.append("1")
            elif threads == 1:
                grid.append(axis.bound if _is_atom(axis.bound) else f"({axis.bound})")
            else:
                grid.append(f"({_paren(axis.bound)} + {threads - 1}) / {threads}")
        if len(block) == 1:
            return f"grid={grid[0]}, block={block[0]}"
        return f"grid=({', '.join(grid)}), block=({', '.join(map(str, block))})"


def _is_atom(text: str) -> bool:
    return re.fullmatch(r"\w+", text) is not None


def _paren(text: str) -> str:
    return text if _is_atom(text) or re.fullmatch(r"[\w\s+\-*]+", text) else f"({text})"


def strip_comments(text: str) -> str:
    """The text with comments and string/char literals blanked (lengths kept)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def constants(source: str) -> dict[str, int]:
    """Integer constants the file defines: `#define TILE 16`, `constexpr int TILE = 16;`."""
    found = {}
    for m in _CONSTANT.finditer(strip_comments(source)):
        name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        found[name] = int(value)
    return found


def _substitute(expr: str, names: dict[str, str]) -> str:
    return _NAME.sub(lambda m: names.get(m.group(0), m.group(0)), expr)


def _compact(expr: str) -> str:
    expr = _CAST.sub("", expr)
    expr = re.sub(r"\s+", "", expr)
    while expr.startswith("(") and expr.endswith(")") and _balanced(expr[1:-1]):
        expr = expr[1:-1]
    return expr


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def _index_form(expr: str, consts: dict[str, int]) -> tuple[str, int | None, bool] | None:
    """(axis, block or None for blockDim, per_block) when `expr` is blockIdx.a * STEP +
    threadIdx.a in any order, or blockIdx.a alone."""
    e = _compact(expr)
    m = re.fullmatch(r"blockIdx\.([xyz])", e)
    if m:
        return m.group(1), 1, True
    b, t, s = r"blockIdx\.([xyz])", r"threadIdx\.([xyz])", r"\(?(blockDim\.[xyz]|\w+)\)?"
    for pattern, order in (
        (rf"{b}\*{s}\+{t}", "bst"), (rf"{s}\*{b}\+{t}", "sbt"),
        (rf"{t}\+{b}\*{s}", "tbs"), (rf"{t}\+{s}\*{b}", "tsb"),
    ):
        m = re.fullmatch(pattern, e)
        if not m:
            continue
        groups = dict(zip(order, m.groups()))
        axis, step = groups["b"], groups["s"]
        if groups["t"] != axis:
            return None
        if step == f"blockDim.{axis}":
            return axis, None, False
        if step.isdigit():
            return axis, int(step), False
        if step in consts:
            return axis, consts[step], False
        return None
    return None


def _upper_bounds(body: str, variable: str) -> list[str]:
    """What `variable` is checked to stay below: `v < E` and `v <= E` (E + 1), else `v >= E`
    (an early exit: `if (v >= n) return;`; a `v >= 1` beside `v < W - 1` is a lower bound),
    E up to the end of its operand; bounds made of names before bare numbers."""
    below, exits = [], []
    for m in re.finditer(rf"(?<![\w.]){re.escape(variable)}\s*(<=|<|>=)(?![<=])\s*", body):
        expr = _operand(body, m.end())
        if not expr:
            continue
        if m.group(1) == ">=":
            exits.append(expr)
        else:
            below.append(f"{expr} + 1" if m.group(1) == "<=" else expr)
    return sorted(below or exits, key=lambda e: not _NAME.search(e))


def _operand(text: str, start: int) -> str:
    """The expression from `start` up to `&&`, `||`, `;`, `,`, `?` or an unmatched `)`."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (text.startswith("&&", i) or text.startswith("||", i) or ch in ";,?{"):
            break
        i += 1
    return " ".join(text[start:i].split())


def _definitions(body: str) -> list[tuple[str, str]]:
    """(name, initializer) of every integer declaration, `int a = e1, b = e2;` included."""
    found = []
    for m in _DECLARATION.finditer(body):
        depth, i, part_start = 0, m.end(), m.end()
        parts = []
        while i < len(body):
            ch = body[i]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and ch in ",;{}":
                parts.append(body[part_start:i])
                part_start = i + 1
                if ch != ",":
                    break
            i += 1
        for part in parts:
            name, eq, expr = part.partition("=")
            if eq and re.fullmatch(r"\s*\w+\s*", name) and expr.strip():
                found.append((name.strip(), expr.strip()))
    return found


def _subscripts(body: str, pointer: str) -> list[str]:
    found = []
    for m in re.finditer(rf"(?<![\w.]){re.escape(pointer)}\s*\[", body):
        depth, i = 1, m.end()
        while i < len(body) and depth:
            depth += (body[i] == "[") - (body[i] == "]")
            i += 1
        found.append(body[m.end(): i - 1])
    return found


def launch_shape(body: str, source: str, int_params: list[str], pointers: list[str]) -> LaunchShape | None:
    """The launch that covers what `body` indexes; None when it reads no blockIdx/threadIdx
    .y or .z and no bounded x index (a 1D launch over the buffers is then as good as any).
    LaunchUnknown when it indexes an axis this cannot cover, with the reason."""
    body = strip_comments(body)
    consts = constants(source)
    definitions = _definitions(body)
    # `int tx = threadIdx.x; int bx = blockIdx.x; int col = bx * TILE + tx;`: aliases of a
    # builtin are read through.
    aliases: dict[str, str] = {}
    for name, expr in definitions:
        e = _compact(expr)
        if _BUILTIN.fullmatch(e) and not e.startswith("blockIdx"):
            aliases[name] = e
    for name, expr in definitions:
        e = _compact(expr)
        if re.fullmatch(r"blockIdx\.[xyz]", e):
            aliases.setdefault(name, e)
    used_axes = sorted({m.group(2) for m in _BUILTIN.finditer(body) if m.group(1) in ("blockIdx", "threadIdx")})
    params = set(int_params)
    axes: dict[str, Axis] = {}
    unbounded: dict[str, str] = {}
    for name, expr in definitions:
        form = _index_form(_substitute(expr, {k: v for k, v in aliases.items() if k != name}), consts)
        if form is None:
            continue
        axis, block, per_block = form
        bounds = [b for b in _upper_bounds(body, name) if set(_NAME.findall(b)) <= params | set(consts)]
        if not bounds:
            if not per_block:
                unbounded.setdefault(axis, name)
            continue
        if axis in axes and not (axes[axis].per_block and not per_block):
            continue
        bound = _substitute(bounds[0], {c: str(v) for c, v in consts.items()})
        axes[axis] = Axis(name, bound, block, per_block)
    missing = [a for a in used_axes if a not in axes]
    if not axes and used_axes in ([], ["x"]):
        return None
    if missing:
        reasons = []
        for a in missing:
            if a in unbounded:
                reasons.append(f"its {a} index `{unbounded[a]}` is checked against no bound made of its "
                               f"integer parameters (e.g. `if ({unbounded[a]} < n)`)")
            else:
                reasons.append(f"it reads blockIdx.{a}/threadIdx.{a} in a form not recognized as an index "
                               f"(`int v = blockIdx.{a} * blockDim.{a} + threadIdx.{a};` checked as `v < n`)")
        raise LaunchUnknown("cannot write a launch: " + "; ".join(reasons))
    shape = LaunchShape(axes, [], [])
    for a in AXES:
        if a in axes:
            for n in _NAME.findall(axes[a].bound):
                if n in params and n not in shape.dims:
                    shape.dims.append(n)
    threads = 1
    for t in shape.block():
        threads *= t
    if threads > 1024:
        raise LaunchUnknown(f"cannot write a launch: the kernel's tiles ask for {shape.block()} = {threads} "
                            "threads a block, more than CUDA's 1024")
    loops = {}
    for m in _FOR.finditer(body):
        if m.group(1) == m.group(2):
            names = [n for n in _NAME.findall(m.group(4)) if n in params]
            loops[m.group(1)] = names
            shape.loop_bounds += [n for n in names if n not in shape.dims and n not in shape.loop_bounds]
    spans: dict[str, list[str]] = {axis.variable: [n for n in _NAME.findall(axis.bound) if n in params]
                                   for axis in axes.values()}
    spans.update(loops)
    local = dict(definitions)
    for pointer in pointers:
        dims: list[str] = []
        for subscript in _subscripts(body, pointer):
            for n in _spanned(subscript, spans, local, params, depth=0):
                if n not in dims:
                    dims.append(n)
        shape.buffer_dims[pointer] = dims
    return shape


def _spanned(expr: str, spans: dict[str, list[str]], local: dict[str, str], params: set[str], depth: int) -> list[str]:
    """The size parameters an index expression ranges over: an index or loop variable stands
    for its bound's parameters, a local variable for its definition's, a parameter for itself."""
    found: list[str] = []
    for n in _NAME.findall(expr):
        if n in spans:
            names = spans[n]
        elif n in params:
            names = [n]
        elif n in local and depth < 8:
            names = _spanned(local[n], spans, local, params, depth + 1)
        else:
            names = []
        found += [m for m in names if m not in found]
    return found
