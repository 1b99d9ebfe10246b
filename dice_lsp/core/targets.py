"""What a request rewrites: the span of the document a job replaces, and the kernel it judges.

A fill replaces the selected range; an optimize replaces one `__global__` function of a
.cu/.cuh file, or `ModelNew` in a KernelBench .py file (appended when there is none). Every
candidate of a job replaces the same span and nothing else, which is what keeps the user's
text outside the range safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import profiler
from dice_lsp.core.text_offsets import line_starts, offset_at, offset_at_point
from profiler.source.cuda_source import Kernel, find_kernel
from profiler.source.document import KERNELBENCH_PROBLEM_NAMES, MODEL, MODEL_NEW, kind_of, module_classes


class TargetError(ValueError):
    """The request names nothing that can be rewritten; the message says why, for the user."""


@dataclass(frozen=True)
class Target:
    start: int  # offsets into the snapshot text, end exclusive
    end: int
    kernel: str | None  # the __global__ function judged, None for a KernelBench file
    language: str  # "cuda" | "kernelbench"
    # Text put around an appended ModelNew so that it stands on its own lines.
    lead: str = ""
    trail: str = ""


def language_of(path: str) -> str:
    """The document's kind (profiler.source.document.kind_of), or TargetError for a file DICE does not read."""
    kind = kind_of(path)
    if kind is not None:
        return kind
    raise TargetError(f"{Path(path).name}: DICE works on .cu, .cuh and KernelBench .py files")


def kernel_span(text: str, kernel: Kernel, starts: list[int] | None = None) -> tuple[int, int]:
    """The kernel's [start, end) offsets in `text`: what an optimize replaces and what its results attach to."""
    return offset_at_point(text, kernel.start, starts), offset_at_point(text, kernel.end, starts)


def kernel_at(text: str, offset: int) -> Kernel | None:
    """The `__global__` function whose text holds the offset (its end included)."""
    starts = line_starts(text)
    for kernel in profiler.find_kernels(text):
        start, end = kernel_span(text, kernel, starts)
        if start <= offset <= end:
            return kernel
    return None


def kernel_named(text: str, name: str | None) -> Kernel:
    """The kernel called `name`, or the only kernel when name is None."""
    try:
        return find_kernel(text, name)
    except ValueError as exc:
        raise TargetError(str(exc)) from exc


def fill_target(text: str, path: str, start: int, end: int) -> Target:
    """What filling text[start:end] changes and is judged by; TargetError, before anything is
    generated, where nothing could judge it: an insertion with only whitespace around it (the
    model has nothing to fill between, and there is no baseline), or a .cu/.cuh file with no
    `__global__` kernel (a CUDA fill is judged against the kernel as it stands)."""
    language = language_of(path)
    if not 0 <= start <= end <= len(text):
        raise TargetError("the range is outside the document")
    if start == end and not text[:start].strip() and not text[end:].strip():
        raise TargetError("an insertion into an empty file has nothing to fill between: write the code "
                          "around it first (for a .cu file a __global__ kernel with its benchmark spec, for "
                          "a .py file a KernelBench Model), or select code to replace")
    kernel = kernel_at(text, start) if language == "cuda" else None
    if language == "cuda" and kernel is None and not profiler.find_kernels(text):
        raise TargetError("no __global__ kernel in this file: a fill is judged against the kernel it is in, as "
                          "it stands; write the kernel (its signature and body) first")
    return Target(start, end, kernel.name if kernel else None, language)


def cuda_kernel_target(text: str, kernel: Kernel) -> Target:
    start, end = kernel_span(text, kernel)
    return Target(start, end, kernel.name, "cuda")


def model_new_target(text: str) -> Target:
    """The `class ModelNew` statement of a KernelBench file, or the end of the file."""
    try:
        classes = module_classes(text)
    except SyntaxError as exc:
        raise TargetError(f"this Python file does not parse (line {exc.lineno}): {exc.msg}") from exc
    if MODEL not in classes:
        raise TargetError(f"no `class {MODEL}` here: a KernelBench file defines "
                          f"{', '.join(KERNELBENCH_PROBLEM_NAMES[:-1])} and {KERNELBENCH_PROBLEM_NAMES[-1]}")
    node = classes.get(MODEL_NEW)
    if node is None:
        lead = "\n\n" if text.endswith("\n") else "\n\n\n"
        return Target(len(text), len(text), None, "kernelbench", lead=lead, trail="\n")
    first_line = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return Target(
        offset_at(text, first_line - 1, 0),
        offset_at_point(text, (node.end_lineno - 1, node.end_col_offset)),
        None,
        "kernelbench",
    )


def optimize_target(text: str, path: str, *, offset: int | None = None, kernel: str | None = None) -> Target:
    """The kernel under the cursor (or named); for a .py file, where ModelNew goes."""
    if language_of(path) == "kernelbench":
        return model_new_target(text)
    if kernel is None and offset is not None:
        found = kernel_at(text, offset)
        if found is None:
            raise TargetError("put the cursor inside a __global__ function to optimize it")
        return cuda_kernel_target(text, found)
    return cuda_kernel_target(text, kernel_named(text, kernel))
