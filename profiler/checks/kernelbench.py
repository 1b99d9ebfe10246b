"""Compile-only check of the CUDA a KernelBench document hands to `load_inline`.

The `cuda_sources` of every `load_inline(...)` call (a string literal, a module-level name
bound to one, or a list of those) is written out as load_inline writes its cuda.cu (three
implicit #include lines, then the pieces joined by newlines) and compiled by nvcc to a cubin
with torch's include folders and load_inline's own flags: no GPU, no build, no Python run.
The compiler's messages land on the document's lines inside the string; messages about
torch's headers land on the `load_inline` line. Torch's headers are found without importing
torch (the language server calls this from a thread).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from profiler.checks.compile import CompilerMissing, nvcc_check
from profiler.source.document import parse_python
from profiler.verdict.types import Diagnostic

IMPLICIT_HEADERS = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")
# What torch passes nvcc for every extension (torch.utils.cpp_extension.COMMON_NVCC_FLAGS).
TORCH_NVCC_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                    "--expt-relaxed-constexpr")
# Flags of the document's own extra_cuda_cflags that change what compiles (not -O, -arch...).
_KEPT_FLAG = re.compile(r"^(-D|-U|-I|--expt-|-std=)")
_PREFIX = re.compile(r"^[rRbBuUfF]*('''|\"\"\"|'|\")")


@dataclass
class InlineCuda:
    """One load_inline call: its line, the string literals of its cuda_sources, its flags."""

    line: int
    pieces: list[ast.Constant]
    flags: tuple[str, ...]


def _strings(node: ast.AST | None, names: dict[str, ast.AST]) -> list[ast.Constant]:
    """The string literals of a cuda_sources argument: a string, a name bound to one, or lists
    and tuples of those. A stack, and each name followed once: `src = [src]` is text too."""
    found: list[ast.Constant] = []
    followed: set[str] = set()
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and node.id in names and node.id not in followed:
            followed.add(node.id)
            node = names[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node)
        elif isinstance(node, (ast.List, ast.Tuple)):
            stack.extend(reversed(node.elts))
    return found


def _keyword(call: ast.Call, name: str, position: int | None = None) -> ast.AST | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[position] if position is not None and len(call.args) > position else None


def inline_cuda(tree: ast.Module) -> list[InlineCuda]:
    """The load_inline calls of a module whose cuda_sources can be read without running it."""
    names: dict[str, ast.AST] = {}
    for statement in tree.body:  # module-level `name = "..."`; the last binding wins
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            names[statement.targets[0].id] = statement.value
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if callee != "load_inline":
            continue
        pieces = _strings(_keyword(node, "cuda_sources", 2), names)
        if not pieces:
            continue
        flags = [s.value for s in _strings(_keyword(node, "extra_cuda_cflags"), names)]
        includes = [s.value for s in _strings(_keyword(node, "extra_include_paths"), names)]
        kept = tuple(f for f in flags if _KEPT_FLAG.match(f)) + tuple(f"-I{p}" for p in includes)
        found.append(InlineCuda(node.lineno, pieces, kept))
    return found


def torch_include_dirs() -> list[str] | None:
    """What load_inline puts on the include path (torch's headers and Python's, which
    pybind11 needs), found without importing torch; None when either is missing."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "include"
    python = sysconfig.get_paths().get("include") or ""
    if not (root / "torch" / "extension.h").is_file() or not os.path.isfile(os.path.join(python, "Python.h")):
        return None
    return [str(root), str(root / "torch" / "csrc" / "api" / "include"), python]


def _value_start(document: str, constant: ast.Constant) -> tuple[int, bool]:
    """Column (0-based) where the string's value starts on its first line, and whether its
    lines are the document's lines (false when escapes like \\n add lines the source lacks)."""
    segment = ast.get_source_segment(document, constant) or ""
    prefix = _PREFIX.match(segment)
    exact = bool(prefix) and segment.count("\n") == constant.value.count("\n")
    return constant.col_offset + (len(prefix.group(0)) if prefix else 0), exact


def place_in_string(document: str, constant: ast.Constant, d: Diagnostic, offset: int) -> Diagnostic:
    """`d`, a message about line `offset` (0-based) of the string `constant`'s value, at the
    document's line and column. When escapes (a \\n) make the value's lines differ from the
    source's, at the string's first line, naming the line inside the string."""
    column, exact = _value_start(document, constant)
    if not exact:
        return Diagnostic(constant.lineno, 1, d.severity, f"line {offset + 1} of the CUDA string: {d.message}")
    return Diagnostic(constant.lineno + offset, d.column + (column if offset == 0 else 0), d.severity, d.message)


def _place(d: Diagnostic, call: InlineCuda, document: str) -> Diagnostic:
    """A diagnostic of the written cuda.cu, moved to the document."""
    first = len(IMPLICIT_HEADERS) + 1
    for piece in call.pieces:
        count = piece.value.count("\n") + 1
        if first <= d.line < first + count:
            return place_in_string(document, piece, d, d.line - first)
        first += count
    return Diagnostic(call.line, 1, d.severity, f"load_inline: {d.message}")


def kernelbench_cuda_check(document: str, path: str) -> list[Diagnostic]:
    """nvcc's diagnostics for the CUDA of the document's load_inline calls, at the document's
    lines. Nothing (no message) when the document does not parse, has no readable
    cuda_sources, or this machine has no nvcc, torch headers or Python headers to check with."""
    return kernelbench_cuda_diagnostics(document, path) or []


def kernelbench_cuda_diagnostics(document: str, path: str) -> list[Diagnostic] | None:
    """As kernelbench_cuda_check, but None when nothing could be checked (see there)."""
    try:
        tree = parse_python(document)
    except SyntaxError:
        return None
    calls = inline_cuda(tree)
    include_dirs = torch_include_dirs() if calls else None
    if not calls or include_dirs is None:
        return None
    found: list[Diagnostic] = []
    for call in calls:
        text = "\n".join([*IMPLICIT_HEADERS, *(piece.value for piece in call.pieces)])
        try:
            diagnostics = nvcc_check(text, "cuda.cu", include_dirs=include_dirs,
                                     flags=TORCH_NVCC_FLAGS + call.flags, keep=True)
        except CompilerMissing:
            return None
        header_lines = len(IMPLICIT_HEADERS)
        for d in diagnostics:
            if d.line <= header_lines and d.severity != "error":
                continue  # torch's headers warn about themselves; not the document's business
            found.append(_place(d, call, document))
    return found
