"""Compile-only check of a KernelBench .py document: Python syntax, as Diagnostics.

The CUDA inside `load_inline` strings is compiled for real only in the sandbox (it needs
torch's headers and a build); here the editor gets the errors Python itself would raise.
"""

from __future__ import annotations

from profiler.results import Diagnostic


def is_kernelbench(path: str) -> bool:
    """`path` decides the kind of document: .py is KernelBench, anything else CUDA."""
    return path.endswith(".py")


def python_check(source: str, path: str) -> list[Diagnostic]:
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return [Diagnostic(exc.lineno or 1, exc.offset or 1, "error", f"{type(exc).__name__}: {exc.msg}")]
    return []
