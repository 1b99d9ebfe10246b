"""Compile-only check of a KernelBench .py document: Python syntax, as Diagnostics.

The CUDA inside its `load_inline` strings is checked by profiler.checks.kernelbench (nvcc,
no build); it runs for real only in the sandbox.
"""

from __future__ import annotations

from profiler.verdict.types import Diagnostic


def python_check(source: str, path: str) -> list[Diagnostic]:
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return [Diagnostic(exc.lineno or 1, exc.offset or 1, "error", f"{type(exc).__name__}: {exc.msg}")]
    except (RecursionError, MemoryError):  # CPython's parser or compiler on deeply nested code
        return [Diagnostic(1, 1, "error", "SyntaxError: nested too deeply for Python's parser")]
    return []
