"""Putting a generated `ModelNew` into a KernelBench problem file.

The engine's `optimize(language="kernelbench")` answers Python source that defines
`ModelNew` (its CUDA in a string, built by `load_inline`). The profiler judges whole
files, so each answer goes into the problem file: in place of the `ModelNew` class the
file already has, or after the file's last line. Only the class is replaced: helper code
above it (an old CUDA string) stays, because removing it could break names the rest of
the file uses.
"""

from __future__ import annotations

import ast


def model_new_lines(source: str) -> tuple[int, int] | None:
    """0-based [start, end) line range of the module-level `class ModelNew` (decorators
    included), or None when there is none or the file does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return first - 1, node.end_lineno
    return None


def splice_model_new(problem: str, candidate: str) -> str:
    """The problem file with `candidate` (code defining ModelNew) in place of its ModelNew,
    or appended after two blank lines when it has none."""
    body = candidate.strip("\n") + "\n"
    span = model_new_lines(problem)
    if span is None:
        return problem.rstrip("\n") + "\n\n\n" + body
    lines = problem.splitlines(keepends=True)
    start, end = span
    return "".join(lines[:start]) + body + "".join(lines[end:])
