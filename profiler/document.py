"""What is in a document, from its path and text alone: its kind (CUDA or KernelBench), its
`__global__` kernels (profiler.cuda_source.find_kernels) and, in a KernelBench file, the
module-level `Model` and `ModelNew` classes.

The one place the server, the CLI, `dice bench` and the profiler ask. Nothing here imports,
compiles or runs the document: Python is read with `ast`, CUDA with tree-sitter.
"""

from __future__ import annotations

import ast
from pathlib import PurePath

from engine.decoding.prompts import KERNELBENCH_PROBLEM_NAMES

CUDA = "cuda"
KERNELBENCH = "kernelbench"
# Suffixes compared without case: a `.PY` or `.CU` file is the same kind as its lower-case twin.
_KINDS = {".cu": CUDA, ".cuh": CUDA, ".py": KERNELBENCH}


def kind_of(path: str | PurePath) -> str | None:
    """CUDA for .cu/.cuh, KERNELBENCH for .py (any case), None for anything else."""
    return _KINDS.get(PurePath(path).suffix.lower())


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
        return "ModelNew" in module_classes(source)
    except SyntaxError:
        return False


def kernelbench_classes(source: str) -> list[ast.ClassDef]:
    """Every module-level `class Model` and `class ModelNew` statement, in order (raises SyntaxError)."""
    return [node for node in parse_python(source).body if isinstance(node, ast.ClassDef) and node.name in ("Model", "ModelNew")]


def benchmark_class(source: str) -> ast.ClassDef | None:
    """The class a KernelBench file's results are about: ModelNew, else Model (None when
    neither is there or the file does not parse)."""
    try:
        classes = module_classes(source)
    except SyntaxError:
        return None
    return classes.get("ModelNew") or classes.get("Model")
