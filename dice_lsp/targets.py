"""What a request rewrites: the span of the document a job replaces, and the kernel it judges.

A fill replaces the selected range; an optimize replaces one `__global__` function of a
.cu/.cuh file, or `ModelNew` in a KernelBench .py file (appended when there is none). Every
candidate of a job replaces the same span and nothing else, which is what keeps the user's
text outside the range safe.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import profiler
from dice_lsp.text_offsets import line_starts, offset_at, offset_at_point
from profiler.cuda_source import Kernel, find_kernel


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
    suffix = Path(path).suffix.lower()
    if suffix in (".cu", ".cuh"):
        return "cuda"
    if suffix == ".py":
        return "kernelbench"
    raise TargetError(f"{Path(path).name}: DICE works on .cu, .cuh and KernelBench .py files")


def _kernel_span(text: str, kernel: Kernel, starts: list[int] | None = None) -> tuple[int, int]:
    return offset_at_point(text, kernel.start, starts), offset_at_point(text, kernel.end, starts)


def kernel_at(text: str, offset: int) -> Kernel | None:
    """The `__global__` function whose text holds the offset (its end included)."""
    starts = line_starts(text)
    for kernel in profiler.find_kernels(text):
        start, end = _kernel_span(text, kernel, starts)
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
    language = language_of(path)
    if not 0 <= start <= end <= len(text):
        raise TargetError("the range is outside the document")
    kernel = kernel_at(text, start) if language == "cuda" else None
    return Target(start, end, kernel.name if kernel else None, language)


def cuda_kernel_target(text: str, kernel: Kernel) -> Target:
    start, end = _kernel_span(text, kernel)
    return Target(start, end, kernel.name, "cuda")


def model_new_target(text: str) -> Target:
    """The `class ModelNew` statement of a KernelBench file, or the end of the file."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise TargetError(f"this Python file does not parse (line {exc.lineno}): {exc.msg}") from exc
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if "Model" not in classes:
        raise TargetError("no `class Model` here: a KernelBench file defines Model, get_inputs and get_init_inputs")
    node = classes.get("ModelNew")
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
