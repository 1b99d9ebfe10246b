"""The profiler: compile, verify and time candidate kernels on the local GPU, safely.

Importing this package never imports torch or CuPy: the language server imports it for
compile checks. Running kernels happens only in a sandboxed subprocess (profiler.sandbox).
The public interface is pinned in docs/architecture.md.
"""

from __future__ import annotations

import os

from profiler.checks.compile import CompilerMissing, nvcc_check
from profiler.checks.kernelbench import kernelbench_cuda_check
from profiler.checks.python import python_check
from profiler.checks.spec import spec_errors_as_diagnostics
from profiler.judge import judge, profile
from profiler.machine.gpu import gpu_name
from profiler.sandbox import Cancelled
from profiler.source.cuda_source import Kernel, Param, find_kernels
from profiler.source.document import is_kernelbench
from profiler.source.spec import Spec, SpecError, parse_spec, spec_template
from profiler.verdict.types import Diagnostic, Verdict

__all__ = [
    "Cancelled",
    "CompilerMissing",
    "Diagnostic",
    "Kernel",
    "Param",
    "Spec",
    "SpecError",
    "Verdict",
    "check",
    "find_kernels",
    "gpu_name",
    "is_kernelbench",
    "judge",
    "profile",
    "parse_spec",
    "spec_errors_as_diagnostics",
    "spec_template",
]


def check(source: str, path: str) -> list[Diagnostic]:
    """Compile only (no GPU needed) and return the compiler's diagnostics in the document's
    1-based coordinates. A bad `dice:` spec is not a compiler message: see
    spec_errors_as_diagnostics. Raises CompilerMissing for a CUDA document when nvcc is absent."""
    if is_kernelbench(path):
        # Python's own errors first; the CUDA strings only of a document that parses.
        return python_check(source, path) or kernelbench_cuda_check(source, path)
    include_dirs = [os.path.dirname(os.path.abspath(path))] if path else []
    return nvcc_check(source, path or "kernel.cu", include_dirs=include_dirs)
