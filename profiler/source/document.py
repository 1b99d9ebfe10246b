"""What is in a document, from its path and text alone: its kind (CUDA or KernelBench), its
`__global__` kernels (profiler.source.cuda_source.find_kernels) and, in a KernelBench file, the
module-level `Model` and `ModelNew` classes.

The one place the server, the CLI, `dice bench` and the profiler ask. Nothing here imports,
compiles or runs the document: Python is read with `ast`, CUDA with tree-sitter.
"""

from __future__ import annotations

import ast
from pathlib import PurePath

CUDA = "cuda"
KERNELBENCH = "kernelbench"
# Suffixes compared without case: a `.PY` or `.CU` file is the same kind as its lower-case twin.
_KINDS = {".cu": CUDA, ".cuh": CUDA, ".py": KERNELBENCH}
# A KernelBench problem: the PyTorch reference `Model`, the inputs of a run and of Model's
# construction. A candidate defines MODEL_NEW beside them.
MODEL = "Model"
MODEL_NEW = "ModelNew"
KERNELBENCH_PROBLEM_NAMES = (MODEL, "get_inputs", "get_init_inputs")


def kind_of(path: str | PurePath) -> str | None:
    """CUDA for .cu/.cuh, KERNELBENCH for .py (any case), None for anything else."""
    return _KINDS.get(PurePath(path).suffix.lower())


def calls_load_inline(tree: ast.AST) -> bool:
    """Whether the module (or statement) calls `load_inline` (by that name, or as an attribute)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if getattr(func, "id", None) == "load_inline" or getattr(func, "attr", None) == "load_inline":
                return True
    return False


def not_judgeable(path: str | PurePath, source: str, compile_only: bool = False) -> str | None:
    """Why `dice check` (`compile_only`) or `dice profile` cannot judge this document from its
    path and text alone, or None: a file that is neither CUDA nor Python, or a .py that parses
    and has no `Model` (a .py is judged as a KernelBench problem; one that does not parse is
    judged, its syntax error is the diagnostic), unless only compiled and it hands CUDA to
    `load_inline`. A CUDA file's kernels are the caller's to ask
    (profiler.source.cuda_source.find_kernels)."""
    kind = kind_of(path)
    name = PurePath(path).name
    if kind is None:
        suffix = PurePath(path).suffix or "no suffix"
        return (f"{name}: dice judges CUDA (.cu, .cuh) and KernelBench (.py) files, not {suffix}; "
                "nothing was compiled")
    if kind == KERNELBENCH:
        try:
            tree = parse_python(source)
        except (SyntaxError, ValueError):  # ValueError: a null byte
            return None
        classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        if MODEL not in classes and not (compile_only and calls_load_inline(tree)):
            return (f"{name}: no `class {MODEL}`: a .py file is judged as a KernelBench problem ({MODEL}, "
                    f"get_inputs, get_init_inputs, and {MODEL_NEW} to time against it); nothing was compiled")
    return None


def is_kernelbench(path: str) -> bool:
    """Whether the profiler treats the document as KernelBench; every other path is CUDA."""
    return kind_of(path) == KERNELBENCH


def parse_python(source: str) -> ast.Module:
    """ast.parse, with a SyntaxError also for what is nested too deeply for Python's parser
    (`x = ------...1` or `1+1+...` some thousands long raise RecursionError, and CPython
    cannot compile such a file either)."""
    try:
        return ast.parse(source)
    except (RecursionError, MemoryError):
        raise SyntaxError("nested too deeply for Python's parser") from None


def module_classes(source: str) -> dict[str, ast.ClassDef]:
    """The classes defined at the top of a module, by name (raises SyntaxError)."""
    return {node.name: node for node in parse_python(source).body if isinstance(node, ast.ClassDef)}


def module_level_names(source: str) -> set[str]:
    """Classes and functions defined at the top of a module (raises SyntaxError)."""
    return {
        node.name
        for node in parse_python(source).body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }


def is_kernelbench_source(source: str) -> bool:
    """Whether the text defines what a KernelBench problem does: Model, get_inputs, get_init_inputs."""
    try:
        names = module_level_names(source)
    except SyntaxError:
        return False
    return all(name in names for name in KERNELBENCH_PROBLEM_NAMES)


def defines_model_new(source: str) -> bool:
    try:
        return MODEL_NEW in module_classes(source)
    except SyntaxError:
        return False


def kernelbench_problem_end(text: str) -> int | None:
    """Where the KernelBench problem at the top of a file ends (after the last of `Model`,
    `get_inputs`, `get_init_inputs`), or None when the file does not parse or lacks one: the
    PyTorch reference, when the file also holds ModelNew."""
    try:
        tree = parse_python(text)
    except (SyntaxError, ValueError):  # ValueError: a null byte
        return None
    ends = {}
    for node in tree.body:
        definition = isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        if definition and node.name in KERNELBENCH_PROBLEM_NAMES:
            ends[node.name] = node.end_lineno
    if len(ends) < len(KERNELBENCH_PROBLEM_NAMES):
        return None
    line = max(ends.values())
    lines = text.splitlines(keepends=True)
    # The end of that line, so that a comment after the last statement stays with it.
    end = sum(len(piece) for piece in lines[: line - 1]) + len(lines[line - 1].rstrip("\r\n"))
    return len(text) if not text[end:].strip() else end


def kernelbench_problem(text: str) -> str:
    """The KernelBench problem of a file (up to the end of its last of Model, get_inputs,
    get_init_inputs): what DICE is shown to write a ModelNew, without a ModelNew already
    written below it. The whole text when it has no such part."""
    return text[: kernelbench_problem_end(text) or len(text)]


def kernelbench_baseline(source: str) -> str:
    """What a KernelBench file is judged against: the file without its ModelNew, so that the
    baseline is Model alone. The module-level `class ModelNew` and every module-level statement
    that calls `load_inline` (the candidate's CUDA build) become blank lines, so that the rest
    keeps its line numbers; loading the baseline then builds nothing (on a machine without
    CUDA, a build of ModelNew's extension would fail the baseline itself). The text unchanged
    when it holds no ModelNew or does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return source
    if not any(isinstance(node, ast.ClassDef) and node.name == MODEL_NEW for node in tree.body):
        return source
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        if (isinstance(node, ast.ClassDef) and node.name == MODEL_NEW) or calls_load_inline(node):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            for index in range(first - 1, node.end_lineno):
                ending = lines[index][len(lines[index].rstrip("\r\n")):]
                lines[index] = ending
    return "".join(lines)


def kernelbench_infill_parts(text: str, start: int, end: int) -> tuple[str | None, str, str]:
    """(reference, prefix, suffix) for filling text[start:end] of a KernelBench .py file.
    DICE's infilling prompt holds the PyTorch reference and the ModelNew file apart, so when
    the span lies after the file's problem part (Model, get_inputs, get_init_inputs), that
    part is the reference and the prefix starts after it; otherwise there is none."""
    problem_end = kernelbench_problem_end(text)
    if problem_end is None or problem_end > start:
        return None, text[:start], text[end:]
    return text[:problem_end], text[problem_end:start].lstrip("\n"), text[end:]


def kernelbench_classes(source: str) -> list[ast.ClassDef]:
    """Every module-level `class Model` and `class ModelNew` statement, in order (raises SyntaxError)."""
    return [node for node in parse_python(source).body if isinstance(node, ast.ClassDef) and node.name in (MODEL, MODEL_NEW)]


def benchmark_class(source: str) -> ast.ClassDef | None:
    """The class a KernelBench file's results are about: ModelNew, else Model (None when
    neither is there or the file does not parse)."""
    try:
        classes = module_classes(source)
    except SyntaxError:
        return None
    return classes.get(MODEL_NEW) or classes.get(MODEL)
